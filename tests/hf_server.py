#!/usr/bin/env python3
"""A stand-in for Hugging Face's file server and model API, for tests/test_pull.sh and
tests/test_models.sh (no internet in the tests).

The files of repository OWNER/NAME are those under ROOT/NAME when that folder exists, else those
under ROOT. It serves FILE at /OWNER/NAME/resolve/main/FILE, with HTTP Range requests (206 and
Content-Range), an ETag holding the file's sha256 (as Hugging Face's for LFS files) and 404 for
anything else; and at /api/models/OWNER/NAME the repository's description as Hugging Face's model
API gives it: a JSON object with "id", "sha" and "siblings": [{"rfilename": FILE}, ...], every
file (in reverse order: a client must not count on one). A NAME of "gone" is a repository that
does not exist: 401 and {"error": ...}, as Hugging Face answers. The OWNER of the URL chooses how
the server behaves, so that one server covers every case:
  plain     as above
  cut       a transfer that starts at byte 0 stops after --cut bytes (the connection closes
            with the Content-Length of the whole file announced): the client must resume
  redirect  Hugging Face's way for LFS files: a 302 to /cdn/FILE carrying X-Linked-Etag (the
            sha256) and X-Linked-Size; the CDN's answer has an ETag that is not a sha256
  badsum    the ETag is the sha256 of other bytes
  norange   Range is ignored: always 200 and the whole file
  overlong  a 206 announcing a 1-byte file (Content-Range: bytes 0-0/1) whose body is 4 MB, sent
            a megabyte at a time with pauses (a client's progress bar is drawn meanwhile)
  gated     the model API answers 403 (a gated repository)
  nojson    the model API answers 200 with a body that is not JSON
Each request is logged to --log as "PATH RANGE" (RANGE: the Range header, or -).
Usage: hf_server.py --root DIR --port-file F --log F [--cut N]; it writes its port to F.
"""
import argparse
import hashlib
import http.server
import json
import os
import socketserver
import sys
import time
import urllib.parse


class Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--port-file", required=True)
    ap.add_argument("--log", required=True)
    ap.add_argument("--cut", type=int, default=65536)
    args = ap.parse_args()

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def do_GET(self):
            rng = self.headers.get("Range")
            with open(args.log, "a") as f:
                f.write("%s %s\n" % (self.path, rng or "-"))
            parts = urllib.parse.unquote(self.path).split("/")
            if len(parts) >= 4 and parts[1] == "cdn":   # /cdn/NAME/FILE...
                return self.send_file(parts[2], "/".join(parts[3:]), rng, "cdn", etag='"not-a-sha256"')
            if len(parts) == 5 and parts[1:3] == ["api", "models"]:
                return self.send_model_info(parts[3], parts[4])
            # /OWNER/NAME/resolve/main/FILE...
            if len(parts) < 6 or parts[3:5] != ["resolve", "main"]:
                return self.send_error(404)
            mode, repo, name = parts[1], parts[2], "/".join(parts[5:])
            path = self.file_path(repo, name)
            if path is None:
                return self.send_error(404)
            if mode == "overlong":
                return self.send_overlong()
            if mode == "redirect":
                data = open(path, "rb").read()
                self.send_response(302)
                self.send_header("Location", "/cdn/%s/%s" % (urllib.parse.quote(repo), urllib.parse.quote(name)))
                self.send_header("X-Linked-Etag", '"%s"' % hashlib.sha256(data).hexdigest())
                self.send_header("X-Linked-Size", str(len(data)))
                self.send_header("ETag", '"0123456789abcdef0123456789abcdef01234567"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_file(repo, name, rng, mode)

        def send_json(self, status, obj):
            body = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def send_model_info(self, owner, repo):
            if repo == "gone":
                return self.send_json(401, {"error": "Repository not found"})
            if owner == "gated":
                return self.send_json(403, {"error": "Access to model %s/%s is restricted" % (owner, repo)})
            if owner == "nojson":
                return self.send_json(200, b"<html>not json</html>")
            base = self.repo_root(repo)
            files = []
            for d, _, names in os.walk(base):
                for n in names:
                    files.append(os.path.relpath(os.path.join(d, n), base).replace(os.sep, "/"))
            files.sort(reverse=True)
            self.send_json(200, {"_id": "0" * 24, "id": "%s/%s" % (owner, repo), "modelId": "%s/%s" % (owner, repo),
                                 "sha": "0123456789abcdef0123456789abcdef01234567", "private": False,
                                 "gated": False, "siblings": [{"rfilename": f} for f in files]})

        def repo_root(self, repo):
            d = os.path.join(args.root, repo)
            return d if repo not in ("", ".", "..") and os.path.isdir(d) else args.root

        def send_overlong(self):
            self.send_response(206)
            self.send_header("Content-Range", "bytes 0-0/1")
            self.send_header("Content-Length", str(4 << 20))
            self.end_headers()
            try:
                for _ in range(4):
                    self.wfile.write(bytes(1 << 20))
                    self.wfile.flush()
                    time.sleep(0.25)
            except OSError:   # the client hung up (it refused the body)
                pass
            self.close_connection = True

        def file_path(self, repo, name):
            if ".." in name.split("/"):
                return None
            path = os.path.join(self.repo_root(repo), name)
            return path if os.path.isfile(path) else None

        def send_file(self, repo, name, rng, mode, etag=None):
            path = self.file_path(repo, name)
            if path is None:
                return self.send_error(404)
            data = open(path, "rb").read()
            if etag is None:
                digest = hashlib.sha256(data if mode != "badsum" else data + b"x").hexdigest()
                etag = '"%s"' % digest
            start = 0
            if rng and mode != "norange":
                if not rng.startswith("bytes=") or not rng.endswith("-"):
                    return self.send_error(400)
                start = int(rng[6:-1])
                if start >= len(data):
                    self.send_response(416)
                    self.send_header("Content-Range", "bytes */%d" % len(data))
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(206)
                self.send_header("Content-Range", "bytes %d-%d/%d" % (start, len(data) - 1, len(data)))
            else:
                self.send_response(200)
            self.send_header("Content-Length", str(len(data) - start))
            self.send_header("ETag", etag)
            self.send_header("Accept-Ranges", "bytes")
            self.end_headers()
            body = data[start:]
            if mode == "cut" and start == 0:
                body = body[:args.cut]
            self.wfile.write(body)
            self.wfile.flush()
            if mode == "cut" and start == 0:
                self.close_connection = True

    srv = Server(("127.0.0.1", 0), Handler)
    tmp = args.port_file + ".tmp"
    with open(tmp, "w") as f:
        f.write("%d\n" % srv.server_address[1])
    os.rename(tmp, args.port_file)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    sys.exit(0)


if __name__ == "__main__":
    main()
