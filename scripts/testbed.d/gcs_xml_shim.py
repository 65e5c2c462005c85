#!/usr/bin/env python3
"""The GCS XML API's writes in front of fake-gcs-server, for clients that write
through the XML API only, such as Rust's object_store (GoogleCloudStorage).

fake-gcs-server 1.56 serves the XML API's reads (GET/HEAD with ranges, the
`list-type=2` listing, DELETE) but answers a plain XML `PUT /<bucket>/<object>`
with 400 "invalid uploadType", and has no XML multipart uploads and no
`x-goog-copy-source` copies. This proxy turns those into JSON API calls and
passes every other request through unchanged:

  PUT  /<b>/<o>                       -> POST /upload/storage/v1/b/<b>/o?uploadType=media&name=<o>
       x-goog-if-generation-match: N  -> &ifGenerationMatch=N (412 when it fails)
       answer: 200, ETag, x-goog-generation
  PUT  /<b>/<o> + x-goog-copy-source  -> POST /storage/v1/b/<sb>/o/<so>/copyTo/b/<b>/o/<o>
       (x-goog-if-generation-match: 0 checked here first: fake-gcs-server's
       copy ignores preconditions; not atomic, fine for tests)
  POST /<b>/<o>?uploads               -> an upload id; parts kept on disk here
  PUT  /<b>/<o>?partNumber=N&uploadId=U  -> stored, ETag = quoted MD5 hex
  POST /<b>/<o>?uploadId=U            -> the listed parts concatenated, one media upload
  DELETE /<b>/<o>?uploadId=U          -> parts dropped

No authentication (fake-gcs-server has none): any bearer token passes.

  gcs_xml_shim.py --listen 127.0.0.1:4444 --upstream 127.0.0.1:4443 --state DIR
"""

from __future__ import annotations

import argparse
import hashlib
import http.client
import http.server
import json
import os
import shutil
import sys
import tempfile
import urllib.parse
import uuid
import xml.etree.ElementTree as ET
from xml.sax.saxutils import escape

UPSTREAM = ("127.0.0.1", 4443)
STATE = "."
# First path segments that belong to fake-gcs-server's own APIs, never a bucket.
PASS_PREFIXES = {"storage", "upload", "download", "batch", "_internal", ""}
HOP_HEADERS = {"connection", "keep-alive", "proxy-connection", "transfer-encoding",
               "te", "trailer", "upgrade", "host", "content-length"}


def upstream_request(method: str, path: str, body=None, headers=None, length=None):
    """One request to fake-gcs-server; returns (status, headers, body bytes)."""
    conn = http.client.HTTPConnection(*UPSTREAM, timeout=120)
    try:
        h = dict(headers or {})
        h["Host"] = f"{UPSTREAM[0]}:{UPSTREAM[1]}"  # fake-gcs-server's -public-host
        if body is not None or method in ("POST", "PUT", "PATCH"):
            h["Content-Length"] = str(length if length is not None else len(body or b""))
        conn.request(method, path, body=body, headers=h)
        resp = conn.getresponse()
        data = resp.read()
        return resp.status, resp.getheaders(), data
    finally:
        conn.close()


def q(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def xml_error(code: str, message: str) -> bytes:
    return (f'<?xml version="1.0" encoding="UTF-8"?><Error><Code>{escape(code)}</Code>'
            f"<Message>{escape(message)}</Message></Error>").encode()


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "topicberg-gcs-xml-shim"

    def log_message(self, fmt, *args):  # errors only (see log_error)
        pass

    def log_error(self, fmt, *args):
        sys.stderr.write("gcs_xml_shim: " + (fmt % args) + "\n")

    # -- plumbing -------------------------------------------------------------

    def read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            out = bytearray()
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return bytes(out)
                out += self.rfile.read(size)
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def reply(self, status: int, body: bytes = b"", headers=None, content_type=None):
        self.send_response(status)
        for k, v in (headers or []):
            if k.lower() not in HOP_HEADERS and k.lower() != "date" and k.lower() != "server":
                self.send_header(k, v)
        if content_type:
            self.send_header("Content-Type", content_type)
        length = str(len(body))
        if self.command == "HEAD":  # the object's size, not this (empty) body's
            length = next((v for k, v in (headers or []) if k.lower() == "content-length"), length)
        self.send_header("Content-Length", length)
        self.end_headers()
        if self.command != "HEAD" and body:
            self.wfile.write(body)

    def split(self):
        """(bucket, object name, query dict, raw path) of the request."""
        u = urllib.parse.urlsplit(self.path)
        parts = u.path.lstrip("/").split("/", 1)
        bucket = urllib.parse.unquote(parts[0])
        obj = urllib.parse.unquote(parts[1]) if len(parts) > 1 else ""
        query = urllib.parse.parse_qs(u.query, keep_blank_values=True)
        if parts[0] in PASS_PREFIXES:
            bucket = ""
        return bucket, obj, query

    def proxy(self, body: bytes | None = None):
        if body is None:
            body = self.read_body()
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
        status, rh, data = upstream_request(self.command, self.path,
                                            body if self.command not in ("GET", "HEAD") else None,
                                            headers)
        self.reply(status, data, rh)

    # -- JSON API helpers -----------------------------------------------------

    def media_upload(self, bucket, name, body, content_type, generation_match=None, length=None):
        path = (f"/upload/storage/v1/b/{q(bucket)}/o?uploadType=media&name={q(name)}")
        if generation_match is not None:
            path += f"&ifGenerationMatch={q(generation_match)}"
        return upstream_request("POST", path, body,
                                {"Content-Type": content_type or "application/octet-stream"},
                                length=length)

    def object_answer(self, status, data, xml_body: bytes = b""):
        """Answer an upload or copy the way the XML API does."""
        if status == 412:
            return self.reply(412, xml_error("PreconditionFailed",
                                             "At least one of the pre-conditions you specified "
                                             "did not hold."), content_type="application/xml")
        if status == 404:
            return self.reply(404, xml_error("NoSuchBucket", "The specified bucket does not exist."),
                              content_type="application/xml")
        if status not in (200, 201):
            return self.reply(status, data, content_type="application/json")
        meta = json.loads(data or b"{}")
        etag = meta.get("etag") or meta.get("md5Hash") or ""
        if not etag.startswith('"'):
            etag = f'"{etag}"'
        headers = [("ETag", etag), ("x-goog-generation", str(meta.get("generation", "")))]
        body = xml_body.replace(b"{ETAG}", escape(etag).encode()) if xml_body else b""
        return self.reply(200, body, headers, "application/xml" if body else None)

    # -- verbs ----------------------------------------------------------------

    def do_GET(self):
        self.proxy(b"")

    def do_HEAD(self):
        self.proxy(b"")

    def do_PATCH(self):
        self.proxy()

    def do_PUT(self):
        bucket, obj, query = self.split()
        if not bucket or not obj:
            return self.proxy()
        if "uploadId" in query and "partNumber" in query:
            return self.put_part(query["uploadId"][0], query["partNumber"][0])
        if query:
            return self.proxy()
        body = self.read_body()
        match = self.headers.get("x-goog-if-generation-match")
        source = self.headers.get("x-goog-copy-source")
        if source:
            return self.copy(bucket, obj, source, match)
        status, _, data = self.media_upload(bucket, obj, body, self.headers.get("Content-Type"),
                                            match)
        self.object_answer(status, data)

    def do_POST(self):
        bucket, obj, query = self.split()
        if bucket and obj and "uploads" in query:
            self.read_body()
            return self.initiate(bucket, obj)
        if bucket and obj and "uploadId" in query:
            return self.complete(bucket, obj, query["uploadId"][0], self.read_body())
        self.proxy()

    def do_DELETE(self):
        bucket, obj, query = self.split()
        if bucket and obj and "uploadId" in query:
            self.read_body()
            shutil.rmtree(self.upload_dir(query["uploadId"][0]), ignore_errors=True)
            return self.reply(204)
        self.proxy()

    # -- copy -----------------------------------------------------------------

    def copy(self, bucket, obj, source, match):
        src = urllib.parse.unquote(source.lstrip("/"))
        sbucket, _, sobj = src.partition("/")
        if match == "0":
            st, _, _ = upstream_request("GET", f"/storage/v1/b/{q(bucket)}/o/{q(obj)}")
            if st == 200:
                return self.object_answer(412, b"")
        status, _, data = upstream_request(
            "POST", f"/storage/v1/b/{q(sbucket)}/o/{q(sobj)}/copyTo/b/{q(bucket)}/o/{q(obj)}", b"",
            {"Content-Type": "application/json"})
        if status == 404:
            return self.reply(404, xml_error("NoSuchKey", f"no such object: {src}"),
                              content_type="application/xml")
        meta = json.loads(data or b"{}") if status == 200 else {}
        xml = (f'<?xml version="1.0" encoding="UTF-8"?><CopyObjectResult>'
               f"<LastModified>{escape(meta.get('updated', ''))}</LastModified>"
               "<ETag>{ETAG}</ETag></CopyObjectResult>").encode()
        self.object_answer(status, data, xml)

    # -- multipart ------------------------------------------------------------

    def upload_dir(self, upload_id: str) -> str:
        if not upload_id or not all(c in "0123456789abcdef" for c in upload_id):
            return os.path.join(STATE, "multipart", "invalid")
        return os.path.join(STATE, "multipart", upload_id)

    def initiate(self, bucket, obj):
        upload_id = uuid.uuid4().hex
        d = self.upload_dir(upload_id)
        os.makedirs(d)
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump({"bucket": bucket, "object": obj,
                       "content_type": self.headers.get("Content-Type")}, f)
        xml = (f'<?xml version="1.0" encoding="UTF-8"?><InitiateMultipartUploadResult>'
               f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(obj)}</Key>"
               f"<UploadId>{upload_id}</UploadId></InitiateMultipartUploadResult>").encode()
        self.reply(200, xml, content_type="application/xml")

    def put_part(self, upload_id, part_number):
        d = self.upload_dir(upload_id)
        body = self.read_body()
        if not os.path.isdir(d):
            return self.reply(404, xml_error("NoSuchUpload", "no such upload"),
                              content_type="application/xml")
        n = int(part_number)
        tmp = os.path.join(d, f".part-{n:05d}.{uuid.uuid4().hex}")
        with open(tmp, "wb") as f:
            f.write(body)
        os.replace(tmp, os.path.join(d, f"part-{n:05d}"))
        self.reply(200, headers=[("ETag", f'"{hashlib.md5(body).hexdigest()}"')])

    def complete(self, bucket, obj, upload_id, body):
        d = self.upload_dir(upload_id)
        if not os.path.isdir(d):
            return self.reply(404, xml_error("NoSuchUpload", "no such upload"),
                              content_type="application/xml")
        with open(os.path.join(d, "meta.json")) as f:
            meta = json.load(f)
        try:
            root = ET.fromstring(body)
        except ET.ParseError as e:
            return self.reply(400, xml_error("MalformedXML", str(e)), content_type="application/xml")
        parts = []
        for p in root.iter():
            if p.tag.rsplit("}", 1)[-1] != "Part":
                continue
            fields = {c.tag.rsplit("}", 1)[-1]: (c.text or "") for c in p}
            parts.append((int(fields.get("PartNumber", "0")), fields.get("ETag", "").strip('"')))
        fd, joined = tempfile.mkstemp(dir=d, prefix=".joined-")
        try:
            with os.fdopen(fd, "wb") as out:
                for n, etag in parts:
                    path = os.path.join(d, f"part-{n:05d}")
                    if not os.path.isfile(path):
                        return self.reply(400, xml_error("InvalidPart", f"part {n} was not uploaded"),
                                          content_type="application/xml")
                    with open(path, "rb") as f:
                        data = f.read()
                    if etag and hashlib.md5(data).hexdigest() != etag:
                        return self.reply(400, xml_error("InvalidPart", f"part {n}: ETag mismatch"),
                                          content_type="application/xml")
                    out.write(data)
            with open(joined, "rb") as f:
                status, _, data = self.media_upload(bucket, obj, f, meta.get("content_type"),
                                                    length=os.path.getsize(joined))
        finally:
            if os.path.exists(joined):
                os.unlink(joined)
        if status in (200, 201):
            shutil.rmtree(d, ignore_errors=True)
        xml = (f'<?xml version="1.0" encoding="UTF-8"?><CompleteMultipartUploadResult>'
               f"<Location>http://{UPSTREAM[0]}:{UPSTREAM[1]}/{escape(bucket)}/{escape(obj)}</Location>"
               f"<Bucket>{escape(bucket)}</Bucket><Key>{escape(obj)}</Key>"
               "<ETag>{ETAG}</ETag></CompleteMultipartUploadResult>").encode()
        self.object_answer(status, data, xml)


def main() -> None:
    global UPSTREAM, STATE
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--listen", default="127.0.0.1:4444")
    p.add_argument("--upstream", default="127.0.0.1:4443")
    p.add_argument("--state", required=True, help="folder for multipart parts")
    a = p.parse_args()
    host, port = a.listen.rsplit(":", 1)
    uh, up = a.upstream.rsplit(":", 1)
    UPSTREAM = (uh, int(up))
    STATE = os.path.abspath(a.state)
    os.makedirs(os.path.join(STATE, "multipart"), exist_ok=True)
    srv = http.server.ThreadingHTTPServer((host, int(port)), Handler)
    srv.daemon_threads = True
    sys.stderr.write(f"gcs_xml_shim: listening on {host}:{port}, upstream {a.upstream}\n")
    sys.stderr.flush()
    srv.serve_forever()


if __name__ == "__main__":
    main()
