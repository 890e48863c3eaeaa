"""A minimal HTTPS webhook receiver that verifies Gatehouse's signatures.

    openssl req -x509 -newkey rsa:2048 -nodes -keyout key.pem -out cert.pem -days 7 \
      -subj "/CN=localhost" -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
      -addext "basicConstraints=critical,CA:FALSE"
    GATEHOUSE_SIGNING_SECRET=whsec_... python3 webhook_receiver.py

Listens on https://127.0.0.1:9443 and prints one line per delivery.
"""

import hashlib
import hmac
import http.server
import os
import ssl
import time

SECRET = os.environ["GATEHOUSE_SIGNING_SECRET"].encode()
TOLERANCE_SECONDS = 300


def verify(headers, body: bytes) -> bool:
    timestamp = headers["X-Service-Timestamp"]
    if abs(time.time() - int(timestamp)) > TOLERANCE_SECONDS:
        return False  # too old, or from the future: a replay
    signed = timestamp.encode() + b"." + body
    expected = "sha256=" + hmac.new(SECRET, signed, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, headers["X-Service-Signature"])


class Receiver(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if not verify(self.headers, body):
            self.send_response(401)
            self.end_headers()
            return
        # Deliveries are at least once: deduplicate on the delivery id.
        print(self.headers["X-Service-Event"], self.headers["X-Service-Delivery-ID"], flush=True)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args):
        pass


server = http.server.HTTPServer(("127.0.0.1", 9443), Receiver)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("cert.pem", "key.pem")
server.socket = context.wrap_socket(server.socket, server_side=True)
server.serve_forever()
