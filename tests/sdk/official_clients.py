"""The providers' official SDKs, stripe-python and razorpay-python, pointed
at Holdfast's sandbox: they create, fetch, capture and refund without an
error, and the sandbox's refusals reach them as the providers' errors.

Run by tests/api/official_sdks.rs (which starts a sandbox and installs the
pinned SDKs into a virtual environment); by hand:

    SANDBOX=http://127.0.0.1:8081 python3 tests/sdk/official_clients.py

Prints one line per step and exits non-zero at the first surprise.
"""

import json
import os
import time
import urllib.parse
import urllib.request
import uuid

import razorpay
import stripe

BASE = os.environ.get("SANDBOX", "http://127.0.0.1:8081").rstrip("/")
STRIPE_KEY = os.environ.get("STRIPE_KEY", "sk_test_holdfast_sandbox")
RZP_KEY = os.environ.get("RZP_KEY", "rzp_test_holdfast_sandbox")
RZP_SECRET = os.environ.get("RZP_SECRET", "rzp_secret_holdfast_sandbox")


def step(name, value=""):
    print(f"ok {name} {value}".rstrip(), flush=True)


def post(path, data=None):
    """A browser's or a test control's POST to the sandbox (not an API)."""
    body = urllib.parse.urlencode(data or {}).encode()
    request = urllib.request.Request(f"{BASE}{path}", data=body, method="POST")

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as answer:
        return answer.code, answer.read()


def check(condition, what):
    if not condition:
        raise SystemExit(f"unexpected: {what}")


def stripe_part():
    client = stripe.StripeClient(
        STRIPE_KEY, base_addresses={"api": f"{BASE}/stripe"}, max_network_retries=0
    )
    order_id = str(uuid.uuid4())
    params = {
        "mode": "payment",
        "success_url": "https://shop.example/return?session_id={CHECKOUT_SESSION_ID}",
        "cancel_url": "https://shop.example/basket",
        "expires_at": int(time.time()) + 3600,
        "client_reference_id": order_id,
        "allowed_payment_method_types": ["card"],
        "metadata": {"order_id": order_id},
        "payment_intent_data": {"metadata": {"order_id": order_id}},
        "line_items": [
            {
                "quantity": 2,
                "price_data": {
                    "currency": "eur",
                    "unit_amount": 1400,
                    "product_data": {"name": "Wild honey"},
                },
            }
        ],
    }
    key = f"checkout-{order_id}"
    session = client.v1.checkout.sessions.create(
        params=params, options={"idempotency_key": key}
    )
    check(session.id.startswith("cs_") and session.status == "open", session)
    check(session.amount_total == 2800, session.amount_total)
    step("stripe session created", session.id)

    # the same key and parameters: the same session; other parameters: refused
    again = client.v1.checkout.sessions.create(
        params=params, options={"idempotency_key": key}
    )
    check(again.id == session.id, "a replay is the first answer")
    try:
        client.v1.checkout.sessions.create(
            params={**params, "client_reference_id": "someone-else"},
            options={"idempotency_key": key},
        )
        raise SystemExit("unexpected: a key reused with other parameters was accepted")
    except stripe.IdempotencyError as error:
        step("stripe idempotency_error", error.http_status)
    try:
        client.v1.checkout.sessions.create(
            params={**params, "expires_at": int(time.time()) + 60},
            options={"idempotency_key": str(uuid.uuid4())},
        )
        raise SystemExit("unexpected: a session expiring in a minute was accepted")
    except stripe.InvalidRequestError as error:
        check(error.param == "expires_at", error.param)
        step("stripe expires_at refused", error.http_status)

    # the shopper pays on the hosted page
    status, _ = post(f"/stripe/pay/{session.id}/pay")
    check(status == 303, status)
    paid = client.v1.checkout.sessions.retrieve(session.id)
    check(paid.payment_status == "paid" and paid.status == "complete", paid)
    intent = paid.payment_intent
    step("stripe session paid", intent)

    refund = client.v1.refunds.create(
        params={"payment_intent": intent, "metadata": {"order_id": order_id}},
        options={"idempotency_key": "f" * 64},
    )
    check(refund.status == "pending" and refund.amount == 2800, refund)
    step("stripe refund created", refund.id)
    fetched = client.v1.refunds.retrieve(refund.id)
    check(fetched.id == refund.id and fetched.payment_intent == intent, fetched)
    listed = client.v1.refunds.list(params={"payment_intent": intent})
    check([r.id for r in listed.data] == [refund.id], listed)
    step("stripe refund fetched and listed")
    try:
        client.v1.refunds.create(
            params={"payment_intent": intent}, options={"idempotency_key": "e" * 64}
        )
        raise SystemExit("unexpected: a second full refund was accepted")
    except stripe.InvalidRequestError as error:
        check(error.code == "charge_already_refunded", error.code)
        step("stripe charge_already_refunded", error.http_status)

    other = client.v1.checkout.sessions.create(
        params={**params, "client_reference_id": str(uuid.uuid4())},
        options={"idempotency_key": str(uuid.uuid4())},
    )
    expired = client.v1.checkout.sessions.expire(other.id)
    check(expired.status == "expired", expired.status)
    step("stripe session expired", other.id)


def razorpay_part():
    client = razorpay.Client(auth=(RZP_KEY, RZP_SECRET), base_url=f"{BASE}/razorpay")
    order = client.order.create(
        {
            "amount": 50000,
            "currency": "INR",
            "receipt": "receipt-1",
            "notes": {"holdfast_order_id": str(uuid.uuid4())},
            "payment": {
                "capture": "automatic",
                "capture_options": {"automatic_expiry_period": 12, "refund_speed": "normal"},
            },
        }
    )
    check(order["status"] == "created" and order["amount"] == 50000, order)
    check(client.order.fetch(order["id"])["id"] == order["id"], "fetch")
    step("razorpay order created", order["id"])
    try:
        client.order.create({"amount": 50000, "currency": "INR", "colour": "blue"})
        raise SystemExit("unexpected: an extra field was accepted")
    except razorpay.errors.BadRequestError as error:
        step("razorpay extra field refused", str(error))

    # an authorisation that arrives after the capture window
    status, body = post(f"/razorpay/_sandbox/orders/{order['id']}/pay?late=true")
    check(status == 200, status)
    made = json.loads(body)
    client.utility.verify_payment_signature(
        {
            "razorpay_order_id": order["id"],
            "razorpay_payment_id": made["payment_id"],
            "razorpay_signature": made["signature"],
        }
    )
    payment = client.payment.fetch(made["payment_id"])
    check(payment["status"] == "authorized", payment["status"])
    step("razorpay payment authorised", payment["id"])
    captured = client.payment.capture(payment["id"], 50000, {"currency": "INR"})
    check(captured["status"] == "captured", captured["status"])
    items = client.order.payments(order["id"])["items"]
    check([p["id"] for p in items] == [payment["id"]], items)
    step("razorpay payment captured")

    key = "holdfast-refund-" + uuid.uuid4().hex
    refund = client.payment.refund(
        payment["id"], {"speed": "normal"}, headers={"X-Refund-Idempotency": key}
    )
    check(refund["status"] == "pending", refund["status"])
    again = client.payment.refund(
        payment["id"], {"speed": "normal"}, headers={"X-Refund-Idempotency": key}
    )
    check(again["id"] == refund["id"], "a replay is the first answer")
    step("razorpay refund created", refund["id"])
    check(client.refund.fetch(refund["id"])["id"] == refund["id"], "fetch refund")
    check(client.payment.fetch_multiple_refund(payment["id"])["count"] == 1, "refunds")
    step("razorpay refund fetched and listed")
    try:
        client.payment.refund(
            payment["id"], {"speed": "normal"}, headers={"X-Refund-Idempotency": "refund:x:y"}
        )
        raise SystemExit("unexpected: a refund key with ':' was accepted")
    except razorpay.errors.BadRequestError as error:
        step("razorpay refund key refused", str(error))


if __name__ == "__main__":
    stripe_part()
    razorpay_part()
    print("all ok", flush=True)
