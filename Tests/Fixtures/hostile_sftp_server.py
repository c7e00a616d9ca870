#!/usr/bin/env python3
"""A hostile SFTP v3 server, run by the tests' real sshd as its sftp subsystem
(`Subsystem sftp /usr/bin/python3 hostile_sftp_server.py`). It speaks just enough of the
protocol for a listing, and lies in it, by the folder asked for:

  /deep… every folder holds one more folder, "dddddddd", 5000 deep (45 KB of path: for a
         client, for ever; but a client that walks it all ends, and its test fails).
  other  the folder lists "good.txt" beside names no POSIX folder can hold: "a/b"
         (a path passed off as one name), "", "nul\\0x", and "." and ".." as files.

Every other request is answered OP_UNSUPPORTED. Reads stdin, writes stdout (the channel)."""

import struct
import sys

inp = sys.stdin.buffer
out = sys.stdout.buffer

FOLDER = 0o040755
FILE = 0o100644


def read_exact(count):
    data = b""
    while len(data) < count:
        chunk = inp.read(count - len(data))
        if not chunk:
            sys.exit(0)
        data += chunk
    return data


def string(value):
    return struct.pack(">I", len(value)) + value


def attrs(mode, size=0):
    # flags (size, permissions, times), size, permissions, atime, mtime
    return struct.pack(">IQIII", 0x1 | 0x4 | 0x8, size, mode, 1_600_000_000, 1_600_000_000)


def send(kind, body):
    out.write(struct.pack(">IB", len(body) + 1, kind) + body)
    out.flush()


def status(request, code, message=b""):
    send(101, struct.pack(">II", request, code) + string(message) + string(b""))


def names(request, entries):
    body = struct.pack(">II", request, len(entries))
    for name, mode, size in entries:
        body += string(name) + string(name) + attrs(mode, size)
    send(104, body)


listed = set()  # handles already read to their end
handles = {}
while True:
    length = struct.unpack(">I", read_exact(4))[0]
    packet = read_exact(length)
    kind = packet[0]
    if kind == 1:  # INIT
        send(2, struct.pack(">I", 3))
        continue
    request = struct.unpack(">I", packet[1:5])[0]
    rest = packet[5:]

    def first_string():
        size = struct.unpack(">I", rest[:4])[0]
        return rest[4:4 + size]

    if kind == 16:  # REALPATH
        path = first_string() or b"/"
        names(request, [(path if path.startswith(b"/") else b"/" + path, FOLDER, 0)])
    elif kind in (7, 17):  # LSTAT, STAT: every path is a folder
        send(105, struct.pack(">I", request) + attrs(FOLDER))
    elif kind == 11:  # OPENDIR
        handle = b"h%d" % len(handles)
        handles[handle] = first_string()
        send(102, struct.pack(">I", request) + string(handle))
    elif kind == 12:  # READDIR
        handle = first_string()
        if handle in listed:
            status(request, 1, b"end")  # EOF
            continue
        listed.add(handle)
        if not handles.get(handle, b"").startswith(b"/deep"):
            names(request, [(b"good.txt", FILE, 4), (b"a/b", FILE, 4), (b"", FILE, 4), (b"nul\0x", FILE, 4),
                            (b".", FILE, 4), (b"..", FILE, 4)])
        elif handles[handle].count(b"/") < 5000:
            names(request, [(b"dddddddd", FOLDER, 0), (b"f.txt", FILE, 1)])
        else:
            names(request, [(b"f.txt", FILE, 1)])
    elif kind == 4:  # CLOSE
        status(request, 0, b"ok")
    else:
        status(request, 8, b"unsupported")
