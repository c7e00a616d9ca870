#!/usr/bin/env python3
"""A small HTTP proxy (or fake server) that the provider tests control, for faults a real
server does not produce on demand: 429/503 with Retry-After, 507, 401, dropped connections,
bodies cut midway, stalled responses. Requests matching no rule are forwarded to --upstream
(or answered 502 without one). Every response closes its connection, which keeps the relay
simple; the client under test opens a new one each time.

Control is line-based JSON on stdin, one JSON answer per line on stdout (after a first line
"PORT <n>"):
  {"cmd": "add", "method": "PUT", "path": "substring", "times": 2, "action": "status",
   "status": 429, "headers": {"Retry-After": "1"}, "body": "..."}
  actions: status, drop, stall (seconds), cut_request (after bytes), cut_response (after bytes),
  throttle (forward, the request and response bodies at "rate" bytes a second each),
  propfind_entries (a 207 multistatus streamed as it is generated: "count" files under
  "prefix", each with "padding" bytes of a dead property; no Content-Length)
  {"cmd": "log"}    -> {"log": [{"method": ..., "path": ..., "action": ...}, ...]}
  {"cmd": "clear"}  -> removes the rules and the log
Listens on 127.0.0.1 only.
"""
import argparse
import json
import socket
import socketserver
import sys
import threading
import time

lock = threading.Lock()
rules = []
log = []
upstream = None


def take_rule(method, path, depth=None):
    with lock:
        for rule in rules:
            if rule["times"] <= 0:
                continue
            if rule.get("method", "*") not in ("*", method):
                continue
            if rule.get("depth") and rule["depth"] != depth:
                continue
            if rule.get("path", "") not in path:
                continue
            rule["times"] -= 1
            return dict(rule)
    return None


def read_head(sock):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return None, b""
        data += chunk
    head, rest = data.split(b"\r\n\r\n", 1)
    return head.decode("latin-1"), rest


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        client = self.request
        head, rest = read_head(client)
        if head is None:
            return
        lines = head.split("\r\n")
        method, target, _ = (lines[0].split(" ", 2) + ["", ""])[:3]
        headers = []
        for line in lines[1:]:
            name, _, value = line.partition(":")
            headers.append((name.strip(), value.strip()))
        lower = {n.lower(): v for n, v in headers}
        length = int(lower.get("content-length", "0") or "0")
        expects = lower.get("expect", "").lower() == "100-continue"

        rule = take_rule(method, target, lower.get("depth"))
        action = rule["action"] if rule else ("forward" if upstream else "none")
        with lock:
            log.append({"method": method, "path": target, "action": action})

        def continue_if_expected():
            if expects:
                client.sendall(b"HTTP/1.1 100 Continue\r\n\r\n")

        def read_body(limit=None):
            nonlocal rest
            want = length if limit is None else min(length, limit)
            body = rest[:want]
            rest = rest[want:]
            while len(body) < want:
                chunk = client.recv(min(1 << 20, want - len(body)))
                if not chunk:
                    break
                body += chunk
            return body

        if action == "drop":
            client.shutdown(socket.SHUT_RDWR)
            return
        if action == "stall":
            continue_if_expected()
            read_body()
            time.sleep(float(rule.get("seconds", 3600)))
            return
        if action == "propfind_entries":
            if length:
                continue_if_expected()
                read_body()
            prefix = rule.get("prefix", "/").rstrip("/")
            pad = "p" * int(rule.get("padding", 0))
            client.sendall(b"HTTP/1.1 207 Multi-Status\r\nContent-Type: application/xml; charset=utf-8\r\n"
                           b"Connection: close\r\n\r\n")
            client.sendall((f'<?xml version="1.0" encoding="UTF-8"?><D:multistatus xmlns:D="DAV:">'
                            f'<D:response><D:href>{prefix}/</D:href><D:propstat><D:prop><D:resourcetype>'
                            f'<D:collection/></D:resourcetype></D:prop><D:status>HTTP/1.1 200 OK</D:status>'
                            f'</D:propstat></D:response>').encode())
            batch = []
            for index in range(int(rule.get("count", 0))):
                batch.append(f'<D:response><D:href>{prefix}/big/file-{index:07d}.txt</D:href><D:propstat><D:prop>'
                             f'<D:resourcetype/><D:getcontentlength>{index % 100}</D:getcontentlength>'
                             f'<D:getetag>&quot;e{index}&quot;</D:getetag><X:pad xmlns:X="urn:x">{pad}</X:pad>'
                             f'</D:prop><D:status>HTTP/1.1 200 OK</D:status></D:propstat></D:response>')
                if len(batch) == 200:
                    client.sendall("".join(batch).encode())
                    batch = []
            client.sendall(("".join(batch) + "</D:multistatus>").encode())
            client.shutdown(socket.SHUT_WR)
            return
        if action in ("status", "none"):
            if length:
                continue_if_expected()
                read_body()
            status = rule.get("status", 502) if rule else 502
            body = (rule.get("body", "") if rule else "no upstream and no rule").encode()
            extra = "".join(f"{n}: {v}\r\n" for n, v in (rule.get("headers", {}) if rule else {}).items())
            client.sendall(f"HTTP/1.1 {status} Fault\r\nContent-Length: {len(body)}\r\n{extra}"
                           f"Connection: close\r\n\r\n".encode() + (body if method != "HEAD" else b""))
            return

        # forward, cut_request, cut_response, throttle: relay to the upstream server.
        rate = float(rule.get("rate", 0)) if action == "throttle" else 0

        def send_paced(sock, data):
            # At `rate` bytes a second, in small pieces, so the sender sees the pace.
            if not rate:
                sock.sendall(data)
                return
            for start in range(0, len(data), 16384):
                piece = data[start:start + 16384]
                sock.sendall(piece)
                time.sleep(len(piece) / rate)

        up = socket.create_connection(upstream)
        try:
            out = [f"{method} {target} HTTP/1.1"]
            for name, value in headers:
                if name.lower() in ("expect", "connection"):
                    continue
                out.append(f"{name}: {value}")
            out.append("Connection: close")
            up.sendall(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
            continue_if_expected()
            sent = 0
            cut_at = int(rule.get("after", 0)) if action == "cut_request" else None
            pending = rest
            rest = b""
            while sent < length:
                if not pending:
                    pending = client.recv(min(16384 if rate else 1 << 20, length - sent))
                    if not pending:
                        break
                piece = pending[: length - sent]
                pending = b""
                if cut_at is not None and sent + len(piece) >= cut_at:
                    up.sendall(piece[: cut_at - sent])
                    # Both sides see the connection break midway through the body.
                    up.shutdown(socket.SHUT_RDWR)
                    client.shutdown(socket.SHUT_RDWR)
                    return
                send_paced(up, piece)
                sent += len(piece)
            relayed = 0
            cut_response = int(rule.get("after", 0)) if action == "cut_response" else None
            while True:
                chunk = up.recv(1 << 20)
                if not chunk:
                    break
                if cut_response is not None and relayed + len(chunk) >= cut_response:
                    client.sendall(chunk[: cut_response - relayed])
                    client.shutdown(socket.SHUT_RDWR)
                    return
                send_paced(client, chunk)
                relayed += len(chunk)
        finally:
            up.close()


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True

    def server_bind(self):
        # A small receive window (inherited by every accepted connection), so a paced relay
        # slows the client's sending within a few hundred kilobytes, as a slow link does.
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)
        super().server_bind()


def main():
    global upstream
    parser = argparse.ArgumentParser()
    parser.add_argument("--upstream", help="HOST:PORT to forward unmatched requests to")
    args = parser.parse_args()
    if args.upstream:
        host, _, port = args.upstream.rpartition(":")
        upstream = (host, int(port))
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        answer = {"ok": True}
        with lock:
            if command["cmd"] == "add":
                rule = {k: v for k, v in command.items() if k != "cmd"}
                rule.setdefault("times", 1)
                rules.append(rule)
            elif command["cmd"] == "log":
                answer = {"log": list(log)}
            elif command["cmd"] == "clear":
                rules.clear()
                log.clear()
        print(json.dumps(answer), flush=True)
    server.shutdown()


if __name__ == "__main__":
    main()
