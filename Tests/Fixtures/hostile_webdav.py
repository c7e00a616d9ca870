#!/usr/bin/env python3
"""A hostile WebDAV server for the restore-hardening tests: it speaks just enough WebDAV for
`backup restore --remote webdav://USER@127.0.0.1:PORT/base` (OPTIONS, PROPFIND Depth 0 /
1 / infinity, GET), checks HTTP Basic credentials the way `rclone serve webdav` does, and
answers from a scenario the test wrote: listing rows with raw hrefs (traversal, other
hosts, duplicates), listed sizes that lie, bodies that are longer, shorter or different,
redirects, stalls, and raw multistatus bodies (huge, entity-laden, DOCTYPE).

Started as `hostile_webdav.py --user USER [--scenario FILE]`; the password comes from the
environment (HOSTILE_WEBDAV_PASS), never argv. The first stdout line is "PORT <n>". Then one
JSON command per stdin line, one JSON answer per stdout line (like fault_proxy.py):
  {"cmd": "scenario", "scenario": {...}}   replaces the scenario (and clears the log)
  {"cmd": "log"}                -> {"log": [{"method", "path", "host", "depth", "status",
                                             "sent", "complete"}, ...]}
  {"cmd": "wait_stalled", "timeout": 10}  -> {"stalled": [paths]} once a GET is held
  {"cmd": "release"}            releases every held GET (they send their bodies)
Closing stdin stops the server.

Scenario (every key optional):
  {"base": "/base",                        the remote folder; PROPFIND on it lists the entries
   "principal": "/principals/user/",       current-user-principal href (Depth 0 answers)
   "entries": [{
       "href": "/base/x.txt",              written into the multistatus exactly as given
       "serve": "/base/x.txt",             where GET serves it (default: the href's path part);
                                           compared after percent-decoding
       "listed": true,                     false: served by GET but not in any listing
       "collection": false,
       "size": 5,                          getcontentlength (default: the body's length)
       "body": "text" | "body_b64": "..." | "repeat": {"byte": 65, "count": 300000000},
       "content_length": 5,                the Content-Length header (default: the body's)
       "redirect": "http://host/path",     GET answers 301 (or "redirect_status") with this Location
       "stall": true,                      GET sends its headers, then waits for "release"
                                           (at most the scenario's "stall_limit" seconds, 30)
       "status": 200}],                    GET status when not redirecting
   "marker": {"groups": [{"name": "docs", "order": 0, "required": true, "patterns": ["docs/"]}],
              "hashes": {"x.txt": "<sha256 hex>"}}     built here: b"BKMARK\\x01" + zlib(lines)
   "marker_b64": "...",                    raw marker bytes instead
   "marker_redirect": "http://...",        GET of the marker answers 301 with this Location
   "propfind_body": {"kind": "raw", "text": "..."}    answer every PROPFIND with this body
                  | {"kind": "huge", "bytes": 300000000}  a streamed multistatus this long
                  | {"kind": "huge_text", "bytes": N}    one href holding N bytes of text
                  | {"kind": "laughs"}    billion laughs (nested internal entities)
                  | {"kind": "doctype"}   DOCTYPE with an external SYSTEM entity
  }
S3 mode: a scenario with "s3": {"bucket": "bucket", "prefix": "laptop", "owner": "id"} makes the
server a path-style S3 endpoint instead (ListObjectsV2, GetObject, HeadBucket, ListBuckets);
each entry's "href" is then the object's key, raw ("laptop/../x.txt"), and the access key id
in the Authorization header must be --user (signatures are not checked).
Bodies are generated lazily in 1 MiB pieces: a 300 MB body is never held in memory. The
log records for every request the bytes of body actually written to the socket, so a test
can tell that a download stopped at its limit. Listens on 127.0.0.1 only.
"""
import argparse
import base64
import json
import os
import sys
import threading
import time
import zlib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, quote, unquote, urlsplit
from xml.sax.saxutils import escape

lock = threading.Lock()
scenario = {}
log = []
released = threading.Event()  # set by "release": held GETs go on
stalled = []  # paths of GETs being held now
stalled_changed = threading.Condition(lock)
USER = ""
PASSWORD = os.environ.get("HOSTILE_WEBDAV_PASS", "")
MARKER = ".backup-marker"  # SyncEngine.defaultMarkerPath
PIECE = 1 << 20


# MARK: The marker, as Sources/BackupTree/Marker.swift writes it

def escape_field(text):
    """The last field of a marker line: backslash and line feed escaped, all else as is."""
    return text.replace("\\", "\\\\").replace("\n", "\\n")


def build_marker(spec):
    """b"BKMARK" + format byte 1 + zlib stream of G/P/H lines, hashes sorted by UTF-8 bytes."""
    lines = []
    for group in spec.get("groups", []):
        lines.append(f"G {group.get('order', 0)} {1 if group.get('required') else 0} {escape_field(group['name'])}\n")
        lines += [f"P {escape_field(p)}\n" for p in group.get("patterns", [])]
    for path in sorted(spec.get("hashes", {}), key=lambda p: p.encode()):
        lines.append(f"H {spec['hashes'][path]} {escape_field(path)}\n")
    return b"BKMARK\x01" + zlib.compress("".join(lines).encode(), 6)


# MARK: The scenario, normalised

def body_of(entry):
    """(length, iterator of byte pieces) of an entry's body, generated lazily."""
    if "repeat" in entry:
        byte, count = bytes([entry["repeat"].get("byte", 65)]), int(entry["repeat"]["count"])

        def pieces():
            left = count
            block = byte * PIECE
            while left > 0:
                yield block[: min(left, PIECE)]
                left -= PIECE
        return count, pieces()
    data = base64.b64decode(entry["body_b64"]) if "body_b64" in entry else entry.get("body", "").encode()
    return len(data), iter([data])


def path_of(href):
    """The decoded path part of an href (which may be a full URL)."""
    return unquote(urlsplit(href).path if "://" in href else href)


def prepared(raw):
    """The scenario with the marker added as an entry (unless there is none)."""
    result = dict(raw)
    base = "/" + raw.get("base", "/base").strip("/")
    result["base"] = base
    entries = [dict(e) for e in raw.get("entries", [])]
    marker = None
    if "marker_b64" in raw:
        marker = base64.b64decode(raw["marker_b64"])
    elif raw.get("marker") is not None:
        marker = build_marker(raw["marker"])
    s3 = raw.get("s3")
    if marker is not None:
        href = f"{s3['prefix']}/{MARKER}" if s3 else f"{base}/{MARKER}"
        entries.append({"href": href, "body_b64": base64.b64encode(marker).decode(),
                        "redirect": raw.get("marker_redirect")})
    if s3:
        # GET serves a key at /<bucket>/<key>; the client percent-encodes it, path_of decodes it.
        for entry in entries:
            entry.setdefault("serve", "/" + s3["bucket"] + "/" + quote(entry["href"], safe="/"))
    result["entries"] = entries
    return result


def find_served(path):
    """The first entry GET serves at `path` (decoded), or None."""
    for entry in scenario.get("entries", []):
        if entry.get("collection"):
            continue
        if path_of(entry.get("serve", entry["href"])).rstrip("/") == path.rstrip("/"):
            return entry
    return None


# MARK: Multistatus bodies

def response_xml(href, collection, size, etag):
    if collection:
        prop = "<d:resourcetype><d:collection/></d:resourcetype>"
    else:
        prop = f"<d:resourcetype/><d:getcontentlength>{size}</d:getcontentlength><d:getetag>\"{etag}\"</d:getetag>"
    return (f"<d:response><d:href>{escape(href)}</d:href><d:propstat><d:prop>{prop}</d:prop>"
            f"<d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>")


HEAD = '<?xml version="1.0" encoding="utf-8"?>\n<d:multistatus xmlns:d="DAV:">'
TAIL = "</d:multistatus>"


def listing(path, depth):
    """The multistatus pieces for a PROPFIND on `path` (decoded) at `depth`."""
    base = scenario["base"]
    folder = path.rstrip("/") or "/"
    principal = scenario.get("principal", f"/principals/{USER}/")
    own = (f"<d:response><d:href>{escape(folder.rstrip('/') + '/')}</d:href><d:propstat><d:prop>"
           "<d:resourcetype><d:collection/></d:resourcetype>"
           f"<d:current-user-principal><d:href>{escape(principal)}</d:href></d:current-user-principal>"
           "</d:prop><d:status>HTTP/1.1 200 OK</d:status></d:propstat></d:response>")
    parts = [HEAD, own]
    if depth != "0":
        for index, entry in enumerate(scenario.get("entries", [])):
            if not entry.get("listed", True):
                continue
            entry_path = path_of(entry["href"]).rstrip("/")
            parent = entry_path.rsplit("/", 1)[0]
            # The remote folder's own listing shows every row, hostile ones included;
            # a subfolder's shows the rows directly inside it.
            if folder != base and not (depth == "1" and parent == folder) and \
                    not (depth == "infinity" and entry_path.startswith(folder + "/")):
                continue
            size = entry.get("size")
            if size is None:
                size = body_of(entry)[0]
            parts.append(response_xml(entry["href"], entry.get("collection", False), size, f"e{index}"))
    parts.append(TAIL)
    return parts


def special_propfind(kind):
    """(length, pieces) of a hostile multistatus body."""
    if kind["kind"] == "raw":
        data = kind["text"].encode()
        return len(data), iter([data])
    if kind["kind"] in ("laughs", "doctype"):
        # The ordinary listing (marker and files included, so a lenient parser would go on
        # to restore), with a DOCTYPE declaring entities and one row that uses them.
        if kind["kind"] == "laughs":
            decl = ['<!ENTITY lol0 "lollollollollollollollollollol">']
            decl += [f'<!ENTITY lol{i} "' + f"&lol{i - 1};" * 10 + '">' for i in range(1, 10)]
            use = "&lol9;"
        else:
            decl = ['<!ENTITY xxe SYSTEM "file:///etc/passwd">']
            use = "&xxe;"
        doctype = "<!DOCTYPE d:multistatus [\n" + "\n".join(decl) + "\n]>\n"
        row = response_xml(f"{scenario['base']}/", False, 1, "x").replace(f"{scenario['base']}/</d:href>",
                                                                          f"{scenario['base']}/{use}</d:href>")
        parts = listing(scenario["base"], "infinity")
        body = "".join(parts[:-1]) + row + TAIL
        data = body.replace(HEAD, '<?xml version="1.0" encoding="utf-8"?>\n' + doctype + HEAD.split("\n", 1)[1], 1).encode()
        return len(data), iter([data])
    if kind["kind"] == "huge_text":
        # One href whose text is `bytes` long: no real listing has a name like that.
        total = int(kind["bytes"])
        head = (HEAD + f"<d:response><d:href>{scenario['base']}/").encode()
        tail = ("</d:href><d:propstat><d:prop><d:resourcetype/></d:prop><d:status>HTTP/1.1 200 OK</d:status>"
                "</d:propstat></d:response>" + TAIL).encode()

        def text_pieces():
            yield head
            left = total
            block = b"a" * PIECE
            while left > 0:
                yield block[: min(left, PIECE)]
                left -= PIECE
            yield tail
        return len(head) + total + len(tail), text_pieces()
    # "huge": fixed-size rows up to `bytes`, so the Content-Length is known without building it.
    total = int(kind["bytes"])
    row = lambda i: response_xml(f"{scenario['base']}/f{i:012d}.bin", False, 1, "x").encode()
    per = len(row(0))
    rows = max(0, (total - len(HEAD) - len(TAIL)) // per)

    def pieces():
        yield HEAD.encode()
        batch = []
        for i in range(rows):
            batch.append(row(i))
            if len(batch) * per >= PIECE:
                yield b"".join(batch)
                batch = []
        yield b"".join(batch) + TAIL.encode()
    return len(HEAD) + rows * per + len(TAIL), pieces()


# MARK: The handler

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as curl expects of a WebDAV server

    def log_message(self, *args):  # quiet: the test reads the log through "log"
        pass

    def record(self, status, sent, complete):
        with lock:
            log.append({"method": self.command, "path": self.path, "host": self.headers.get("Host", ""),
                        "depth": self.headers.get("Depth"), "status": status, "sent": sent,
                        "complete": complete})

    def answer(self, status, length=0, pieces=(), headers=(), hold=False):
        """Status, headers, then the pieces; stops quietly when the client hangs up."""
        sent = 0
        try:
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(length))
            self.end_headers()
            if hold:
                self.hold()
            if self.command != "HEAD":
                for piece in pieces:
                    self.wfile.write(piece)
                    sent += len(piece)
            self.wfile.flush()
            self.record(status, sent, True)
        except (BrokenPipeError, ConnectionResetError):
            self.record(status, sent, False)
            self.close_connection = True

    def hold(self):
        with lock:
            stalled.append(self.path)
            stalled_changed.notify_all()
        released.wait(timeout=float(scenario.get("stall_limit", 30)))
        with lock:
            stalled.remove(self.path)

    def authorised(self):
        if scenario.get("s3"):
            # "AWS4-HMAC-SHA256 Credential=<key id>/<date>/…": the key id is checked, not the signature.
            credential = self.headers.get("Authorization", "").partition("Credential=")[2]
            if credential.split("/", 1)[0] == USER:
                return True
            body = b"<Error><Code>InvalidAccessKeyId</Code></Error>"
            self.answer(403, len(body), [body], [("Content-Type", "application/xml")])
            return False
        expected = "Basic " + base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") == expected:
            return True
        body = b"Unauthorized\n"
        self.answer(401, len(body), [body], [("WWW-Authenticate", 'Basic realm="rclone"')])
        return False

    def read_request_body(self):
        length = int(self.headers.get("Content-Length") or 0)
        while length > 0:
            length -= len(self.rfile.read(min(length, PIECE)))

    def do_OPTIONS(self):
        self.read_request_body()
        self.answer(200, 0, [], [("DAV", "1, 2"), ("Allow", "OPTIONS, GET, HEAD, PROPFIND")])

    def do_PROPFIND(self):
        self.read_request_body()
        if not self.authorised():
            return
        path = path_of(self.path)
        depth = self.headers.get("Depth", "infinity")
        base = scenario["base"]
        if not (path.rstrip("/") + "/").startswith(base + "/"):
            self.answer(404)
            return
        headers = [("Content-Type", "application/xml; charset=utf-8")]
        special = scenario.get("propfind_body")
        if special:
            length, pieces = special_propfind(special)
            self.answer(207, length, pieces, headers)
            return
        data = "".join(listing(path, depth)).encode()
        self.answer(207, len(data), [data], headers)

    def s3_route(self):
        """Answers the S3 requests that are not an object's GET; False for an object's GET."""
        s3 = scenario["s3"]
        parts = urlsplit(self.path)
        path = unquote(parts.path)
        query = parse_qs(parts.query)
        xml = [("Content-Type", "application/xml")]
        if path == "/":
            body = (f'<?xml version="1.0" encoding="UTF-8"?><ListAllMyBucketsResult><Owner><ID>{s3.get("owner", "owner")}'
                    f'</ID></Owner><Buckets><Bucket><Name>{s3["bucket"]}</Name></Bucket></Buckets>'
                    '</ListAllMyBucketsResult>').encode()
            self.answer(200, len(body), [body], xml)
            return True
        if path.rstrip("/") == "/" + s3["bucket"]:
            if self.command == "HEAD" or "list-type" not in query:
                self.answer(200, 0, [], xml)
                return True
            rows = []
            for index, entry in enumerate(scenario.get("entries", [])):
                if not entry.get("listed", True):
                    continue
                size = entry.get("size")
                if size is None:
                    size = body_of(entry)[0]
                rows.append(f"<Contents><Key>{escape(entry['href'])}</Key><Size>{size}</Size>"
                            f"<ETag>&quot;e{index}&quot;</ETag></Contents>")
            body = (f'<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>{s3["bucket"]}</Name>'
                    f'<Prefix>{escape(query.get("prefix", [""])[0])}</Prefix><KeyCount>{len(rows)}</KeyCount>'
                    f'<IsTruncated>false</IsTruncated>{"".join(rows)}</ListBucketResult>').encode()
            self.answer(200, len(body), [body], xml)
            return True
        return False

    def do_GET(self):
        self.read_request_body()
        if not self.authorised():
            return
        if scenario.get("s3") and self.s3_route():
            return
        with lock:
            entry = find_served(path_of(self.path))
        if entry is None:
            body = b"Not Found\n"
            self.answer(404, len(body), [body])
            return
        if entry.get("redirect"):
            self.answer(int(entry.get("redirect_status", 301)), 0, [], [("Location", entry["redirect"])])
            return
        length, pieces = body_of(entry)
        self.answer(int(entry.get("status", 200)), int(entry.get("content_length", length)), pieces,
                    [("Content-Type", "application/octet-stream")], hold=entry.get("stall", False))

    do_HEAD = do_GET

    def refuse(self):
        self.read_request_body()
        self.answer(403, 0)

    do_PUT = do_DELETE = do_MKCOL = do_MOVE = do_COPY = do_PROPPATCH = refuse


class Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True


def main():
    global USER, scenario
    parser = argparse.ArgumentParser()
    parser.add_argument("--user", required=True)
    parser.add_argument("--scenario", help="a JSON file with the first scenario")
    args = parser.parse_args()
    USER = args.user
    if args.scenario:
        with open(args.scenario) as handle:
            scenario = prepared(json.load(handle))
    else:
        scenario = prepared({})
    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(f"PORT {server.server_address[1]}", flush=True)
    for line in sys.stdin:
        command = json.loads(line)
        answer = {"ok": True}
        if command["cmd"] == "scenario":
            with lock:
                scenario = prepared(command["scenario"])
                log.clear()
            released.clear()
        elif command["cmd"] == "log":
            with lock:
                answer = {"log": list(log)}
        elif command["cmd"] == "wait_stalled":
            deadline = time.monotonic() + float(command.get("timeout", 10))
            with lock:
                while not stalled and time.monotonic() < deadline:
                    stalled_changed.wait(timeout=max(0.0, deadline - time.monotonic()))
                answer = {"stalled": list(stalled)}
        elif command["cmd"] == "release":
            released.set()
        print(json.dumps(answer), flush=True)
    released.set()
    server.shutdown()


if __name__ == "__main__":
    main()
