"""A webhook receiver written with the Standard Webhooks reference library
for Python (standardwebhooks, from PyPI), for tests/api/outgoing.rs.

It verifies every request with the library (signature and timestamp
tolerance), answers 500 to the first FAIL_FIRST tries of each webhook-id
and to every request while the file FAIL_WHILE exists (a receiver that is
down for a while),
processes each id once (a repeat is answered 200 and not processed again),
and appends one JSON line per request to LOG:
{"id", "timestamp", "signature", "body", "verified", "answered",
"processed", "type", "error"}.

Environment: PORT, SECRET (whsec_...), FAIL_FIRST (default 0), FAIL_WHILE
(a path; default none), LOG.
"""

import json
import os
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from standardwebhooks.webhooks import Webhook, WebhookVerificationError

PORT = int(os.environ["PORT"])
WEBHOOK = Webhook(os.environ["SECRET"])
FAIL_FIRST = int(os.environ.get("FAIL_FIRST", "0"))
FAIL_WHILE = os.environ.get("FAIL_WHILE")
LOG = os.environ["LOG"]

lock = threading.Lock()
tries = {}
processed = set()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("content-length", "0"))
        body = self.rfile.read(length).decode("utf-8")
        headers = {k.lower(): v for k, v in self.headers.items()}
        record = {
            "id": headers.get("webhook-id"),
            "timestamp": headers.get("webhook-timestamp"),
            "signature": headers.get("webhook-signature"),
            "body": body,
            "verified": False,
            "processed": False,
            "type": None,
            "error": None,
        }
        try:
            event = WEBHOOK.verify(body, headers)
            record["verified"] = True
            record["type"] = event.get("type")
        except WebhookVerificationError as error:
            record["error"] = str(error)
        with lock:
            if not record["verified"]:
                status = 400
            else:
                seen = tries.get(record["id"], 0)
                tries[record["id"]] = seen + 1
                if seen < FAIL_FIRST or (FAIL_WHILE and os.path.exists(FAIL_WHILE)):
                    status = 500
                else:
                    status = 200
                    if record["id"] not in processed:
                        processed.add(record["id"])
                        record["processed"] = True
            record["answered"] = status
            with open(LOG, "a", encoding="utf-8") as log:
                log.write(json.dumps(record) + "\n")
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", PORT), Receiver)
print("listening", flush=True)
sys.stdout.flush()
server.serve_forever()
