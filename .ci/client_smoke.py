"""Smoke test of the Python client generated from payd's /openapi.json (.ci/client-smoke.sh).

Usage: python client_smoke.py BASE_URL ADMIN_KEY

Talks to payd only through the generated package `payd_client`: its operation functions and
models, never raw HTTP. A merchant (admin route), the shop's webhook endpoint pointed at a
receiver in this script, a payment with manual capture, its confirmation with a test card, the
capture, a partial refund, and the merchant's events. Every event delivered to the receiver is
verified with the Standard Webhooks library (`standardwebhooks`, pinned by client-smoke.sh),
parsed into the generated event model, and checked against what the calls returned.

An answer that the generated code cannot parse (the document says one thing, payd sends
another) fails with the operation, the model and the body payd sent: the schema to fix is the
one named there.
"""

import json
import queue
import sys
import threading
import time
import traceback
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx
from standardwebhooks import Webhook, WebhookVerificationError
from payd_client import AuthenticatedClient, Client
from payd_client.errors import UnexpectedStatus
from payd_client.api.admin import create_merchant
from payd_client.api.events import list_events
from payd_client.api.operations import live
from payd_client.api.payments import capture_payment, confirm_payment, create_payment
from payd_client.api.refunds import create_refund
from payd_client.api.webhooks import put_endpoint
from payd_client.models import (
    CaptureMethodDto,
    CapturePaymentRequest,
    CardInput,
    ConfirmPaymentRequest,
    CreatedMerchant,
    CreateMerchantRequest,
    CreatePaymentRequest,
    CreateRefundRequest,
    Endpoint,
    EventPayment,
    EventRefund,
    Health,
    ListEventsRequest,
    ListEventView,
    Payment,
    PaymentMethodData,
    PutEndpointRequest,
    Refund,
)

BASE_URL, ADMIN_KEY = sys.argv[1], sys.argv[2]
TIMEOUT = httpx.Timeout(20.0)
DELIVERY_WAIT_SECS = 30

# The last answer payd sent, kept by an httpx response hook (it only looks) so that a failed
# parse can show the body it failed on.
last = {}


def remember(response: httpx.Response) -> None:
    response.read()
    last["request"] = f"{response.request.method} {response.request.url.path}"
    last["status"] = response.status_code
    last["body"] = response.text


def authenticated(key: str) -> AuthenticatedClient:
    return AuthenticatedClient(
        base_url=BASE_URL,
        token=key,
        prefix="",
        auth_header_name="api-key",
        timeout=TIMEOUT,
        raise_on_unexpected_status=True,
        httpx_args={"event_hooks": {"response": [remember]}},
    )


def fail(message: str) -> None:
    print(f"client smoke test FAILED: {message}", file=sys.stderr)
    sys.exit(1)


def call(name: str, operation, expected_status: int, model: type, **kwargs):
    """Runs a generated operation's sync_detailed; fails unless payd answered expected_status
    and the generated code parsed it into `model`."""
    last.clear()
    try:
        response = operation.sync_detailed(**kwargs)
    except httpx.HTTPError as err:
        fail(f"{name}: no answer from payd: {err!r}")
    except UnexpectedStatus as err:
        fail(
            f"{name}: payd answered {err.status_code}, a status /openapi.json does not list for "
            f"this operation: {err.content.decode(errors='replace')}"
        )
    except Exception:  # the generated parser refused payd's answer
        traceback.print_exc()
        fail(
            f"{name}: the generated client could not parse payd's answer "
            f"({last.get('request')} -> {last.get('status')}) into {model.__name__} or the "
            f"error model: the schema of this answer in /openapi.json does not match what payd "
            f"sends (the traceback above names the model and field). Body: {last.get('body')}"
        )
    if response.status_code != expected_status or not isinstance(response.parsed, model):
        fail(
            f"{name}: expected {expected_status} with a {model.__name__}, got "
            f"{int(response.status_code)} parsed as {type(response.parsed).__name__}: "
            f"{response.content.decode(errors='replace')}"
        )
    print(f"ok  {name}: {int(response.status_code)} {model.__name__}")
    return response.parsed


def check(condition: bool, message: str) -> None:
    if not condition:
        fail(message)


anonymous = Client(base_url=BASE_URL, timeout=TIMEOUT, raise_on_unexpected_status=True)
health = call("GET /health/live", live, 200, Health, client=anonymous)

admin = authenticated(ADMIN_KEY)
merchant = call(
    "POST /admin/merchants",
    create_merchant,
    201,
    CreatedMerchant,
    client=admin,
    body=CreateMerchantRequest(name="Client smoke test"),
)
check(merchant.secret_key != "" and merchant.profile_id != "", "the merchant has no key or shop")
shop = authenticated(merchant.secret_key)

# The receiver: each delivery is kept raw (the body bytes and the headers) and answered 204;
# it is verified below, as a merchant's server would before trusting it.
deliveries: "queue.Queue[tuple[dict[str, str], bytes]]" = queue.Queue()


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        body = self.rfile.read(int(self.headers.get("content-length", "0")))
        deliveries.put(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args) -> None:  # quiet
        pass


receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
threading.Thread(target=receiver.serve_forever, daemon=True).start()
receiver_url = f"http://127.0.0.1:{receiver.server_address[1]}/payd-hooks"

# Set before the payment: an event recorded while a shop has no endpoint is not delivered.
endpoint = call(
    "PUT /account/shops/{profile_id}/webhook",
    put_endpoint,
    200,
    Endpoint,
    client=shop,
    profile_id=merchant.profile_id,
    body=PutEndpointRequest(url=receiver_url),
)
check(endpoint.url == receiver_url and endpoint.enabled, f"endpoint as set: {endpoint}")
check(
    isinstance(endpoint.secret, str) and endpoint.secret.startswith("whsec_"),
    f"a new endpoint shows its secret once; got {endpoint.secret!r}",
)
webhook = Webhook(endpoint.secret)

payment = call(
    "POST /payments",
    create_payment,
    201,
    Payment,
    client=shop,
    x_profile_id=merchant.profile_id,
    body=CreatePaymentRequest(amount=1000, currency="USD", capture_method=CaptureMethodDto.MANUAL),
)
check(payment.amount == 1000 and payment.currency == "USD", f"payment as created: {payment}")
check(payment.profile_id == merchant.profile_id, f"payment in shop {payment.profile_id}")
check(payment.capture_method == CaptureMethodDto.MANUAL, f"capture method {payment.capture_method}")

confirmed = call(
    "POST /payments/{payment_id}/confirm",
    confirm_payment,
    200,
    Payment,
    client=shop,
    payment_id=payment.payment_id,
    body=ConfirmPaymentRequest(
        payment_method_data=PaymentMethodData(
            card=CardInput(number="4242424242424242", exp_month=12, exp_year=2035, cvc="123")
        )
    ),
)
check(
    confirmed.status == "requires_capture",
    f"after confirm: status {confirmed.status!r}, expected 'requires_capture'",
)
check(confirmed.amount_capturable == 1000, f"capturable {confirmed.amount_capturable}, expected 1000")

captured = call(
    "POST /payments/{payment_id}/capture",
    capture_payment,
    200,
    Payment,
    client=shop,
    payment_id=payment.payment_id,
    body=CapturePaymentRequest(),
)
check(captured.status == "succeeded", f"after capture: status {captured.status!r}, expected 'succeeded'")
check(captured.amount_captured == 1000, f"captured {captured.amount_captured}, expected 1000")

refund = call(
    "POST /refunds",
    create_refund,
    201,
    Refund,
    client=shop,
    body=CreateRefundRequest(payment_id=payment.payment_id, amount=400, reason="smoke test"),
)
check(refund.payment_id == payment.payment_id, f"refund of {refund.payment_id}")
check(refund.amount == 400, f"refund amount {refund.amount}, expected 400")
check(refund.status == "succeeded", f"refund status {refund.status!r}, expected 'succeeded' (card 4242…)")

# Events are recorded with the change they tell of; a short bounded wait all the same.
deadline = time.monotonic() + 10
while True:
    events = call(
        "POST /events/{merchant_id}",
        list_events,
        200,
        ListEventView,
        client=shop,
        merchant_id=merchant.merchant_id,
        body=ListEventsRequest(limit=100),
    )
    about_payment = [e for e in events.data if e.object_id == payment.payment_id]
    payment_events = [e for e in about_payment if e.event_type.startswith("payment")]
    if payment_events or time.monotonic() > deadline:
        break
    time.sleep(0.5)
check(
    bool(payment_events),
    "no payment event about the payment; events: "
    + json.dumps([(e.event_type, e.object_id) for e in events.data]),
)
print("events:", ", ".join(f"{e.event_type} ({e.object_id})" for e in reversed(events.data)))


def payment_is(status: str, version: int):
    def judge(event) -> str | None:
        if not isinstance(event, EventPayment):
            return f"a {type(event).__name__}, expected an EventPayment"
        p = event.content.object_
        if (p.payment_id, p.status, p.version) != (payment.payment_id, status, version):
            return f"object {p.payment_id} {p.status} v{p.version}, expected {payment.payment_id} {status} v{version}"
        return None

    return judge


def refund_is(event) -> str | None:
    if not isinstance(event, EventRefund):
        return f"a {type(event).__name__}, expected an EventRefund"
    r = event.content.object_
    if (r.refund_id, r.amount, r.version) != (refund.refund_id, 400, refund.version):
        return f"object {r.refund_id} {r.amount} v{r.version}, expected {refund.refund_id} 400 v{refund.version}"
    return None


# What the calls above announce, each with the object as it was right after the change.
expected = {
    "payment_authorized": payment_is("requires_capture", confirmed.version),
    "payment_succeeded": payment_is("succeeded", captured.version),
    "refund_succeeded": refund_is,
}
delivered = {}
deadline = time.monotonic() + DELIVERY_WAIT_SECS
while len(delivered) < len(expected):
    try:
        headers, body = deliveries.get(timeout=max(0.0, deadline - time.monotonic()))
    except queue.Empty:
        fail(
            f"no delivery of {sorted(set(expected) - set(delivered))} within {DELIVERY_WAIT_SECS} s "
            f"(delivered: {sorted(delivered)})"
        )
    try:
        raw = webhook.verify(body, headers)
    except WebhookVerificationError as err:
        fail(f"delivery {headers.get('webhook-id')}: the signature does not verify: {err}")
    event_type = raw.get("event_type")
    judge = expected.get(event_type)
    check(judge is not None, f"unexpected event {event_type}: {body.decode(errors='replace')}")
    check(event_type not in delivered, f"{event_type} delivered twice")
    model = EventPayment if event_type.startswith("payment_") else EventRefund
    try:
        event = model.from_dict(raw)
    except Exception:
        traceback.print_exc()
        fail(
            f"{event_type}: the generated {model.__name__} could not parse the delivered event: the "
            f"schema of the webhook body in /openapi.json does not match what payd sends. Body: {body!r}"
        )
    check(event.event_id == headers["webhook-id"], f"webhook-id {headers['webhook-id']} for {event.event_id}")
    check(event.merchant_id == merchant.merchant_id, f"event of merchant {event.merchant_id}")
    wrong = judge(event)
    check(wrong is None, f"{event_type} {event.event_id}: {wrong}")
    # The library must refuse what payd did not sign, or the check above proves nothing.
    tampered = body + b" "
    try:
        webhook.verify(tampered, headers)
        fail(f"a tampered body of {event.event_id} verified")
    except WebhookVerificationError:
        pass
    delivered[event_type] = event
    print(f"ok  delivered and verified: {event_type} {event.event_id} ({model.__name__})")
receiver.shutdown()

print(
    f"client smoke test passed: merchant {merchant.merchant_id}, payment {payment.payment_id} "
    f"requires_capture -> {captured.status}, refund {refund.refund_id} {refund.status}, "
    f"{len(events.data)} events, {len(delivered)} delivered and verified"
)
