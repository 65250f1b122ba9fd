// Smoke test of the TypeScript client generated from payd's /openapi.json (.ci/client-smoke.sh).
//
// Usage: tsx client_smoke.ts BASE_URL ADMIN_KEY   (beside it: payd.d.ts, made by
// openapi-typescript from the same document, and node_modules with openapi-fetch and
// standardwebhooks)
//
// Talks to payd only through openapi-fetch typed by the generated `paths`: a merchant (admin
// route), the shop's webhook endpoint pointed at a receiver in this script, a payment with
// manual capture confirmed with a test card, its capture, a partial refund; then every event
// delivered to the receiver is verified with the Standard Webhooks library and checked against
// what the calls returned. `tsc --noEmit` runs on this file first, so a request or an answer
// the document describes differently from what this script uses fails before anything runs.

import { createServer, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";

import createClient from "openapi-fetch";
import { Webhook } from "standardwebhooks";

import type { components, paths } from "./payd";

type Schemas = components["schemas"];
type PaymentEvent = Schemas["Event_Payment"];
type RefundEvent = Schemas["Event_Refund"];

const [BASE_URL, ADMIN_KEY] = process.argv.slice(2);
if (!BASE_URL || !ADMIN_KEY) {
    console.error("usage: tsx client_smoke.ts BASE_URL ADMIN_KEY");
    process.exit(2);
}
const REQUEST_TIMEOUT_MS = 20_000;
const DELIVERY_WAIT_MS = 30_000;

function fail(message: string): never {
    console.error(`TypeScript client smoke test FAILED: ${message}`);
    process.exit(1);
}

function check(condition: boolean, message: string): asserts condition {
    if (!condition) fail(message);
}

// Every call's answer: the expected status with a body the generated types call a success.
async function expect<T>(
    name: string,
    status: number,
    call: Promise<{ data?: T; error?: unknown; response: Response }>,
): Promise<T> {
    let result: { data?: T; error?: unknown; response: Response };
    try {
        result = await call;
    } catch (err) {
        fail(`${name}: no answer from payd: ${String(err)}`);
    }
    const { data, error, response } = result;
    if (response.status !== status || data === undefined) {
        fail(
            `${name}: expected ${status}, payd answered ${response.status}: ` +
                JSON.stringify(error ?? data),
        );
    }
    console.log(`ok  ${name}: ${response.status}`);
    return data;
}

const signal = () => AbortSignal.timeout(REQUEST_TIMEOUT_MS);
const anonymous = createClient<paths>({ baseUrl: BASE_URL });
const admin = createClient<paths>({ baseUrl: BASE_URL, headers: { "api-key": ADMIN_KEY } });

// The receiver: what arrives is kept raw (body bytes and the three signature headers) and
// verified below, as a merchant's server would before trusting it.
interface Delivery {
    headers: Record<string, string>;
    body: Buffer;
}
const deliveries: Delivery[] = [];

function header(req: IncomingMessage, name: string): string {
    const value = req.headers[name];
    return Array.isArray(value) ? value.join(", ") : (value ?? "");
}

const receiver = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
        const headers: Record<string, string> = {};
        for (const name of ["webhook-id", "webhook-timestamp", "webhook-signature"]) {
            headers[name] = header(req, name);
        }
        deliveries.push({ headers, body: Buffer.concat(chunks) });
        res.writeHead(204).end();
    });
});
await new Promise<void>((resolve) => receiver.listen(0, "127.0.0.1", resolve));
const receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/payd-hooks`;

try {
    await main();
} finally {
    receiver.close();
}

async function main(): Promise<void> {
    const health = await expect("GET /health/live", 200, anonymous.GET("/health/live", { signal: signal() }));
    check(health.status === "ok", `health: ${JSON.stringify(health)}`);

    const merchant = await expect(
        "POST /admin/merchants",
        201,
        admin.POST("/admin/merchants", { body: { name: "TypeScript client smoke test" }, signal: signal() }),
    );
    check(merchant.secret_key !== "" && merchant.test_mode, `merchant: ${JSON.stringify(merchant)}`);
    const shop = createClient<paths>({ baseUrl: BASE_URL, headers: { "api-key": merchant.secret_key } });
    const profile_id = merchant.profile_id;

    const endpoint = await expect(
        "PUT /account/shops/{profile_id}/webhook",
        200,
        shop.PUT("/account/shops/{profile_id}/webhook", {
            params: { path: { profile_id } },
            body: { url: receiverUrl },
            signal: signal(),
        }),
    );
    check(endpoint.url === receiverUrl && endpoint.enabled, `endpoint: ${JSON.stringify(endpoint)}`);
    const secret = endpoint.secret;
    check(typeof secret === "string" && secret.startsWith("whsec_"), "a new endpoint shows its secret");
    const webhook = new Webhook(secret);

    const payment = await expect(
        "POST /payments",
        201,
        shop.POST("/payments", {
            params: { header: { "x-profile-id": profile_id } },
            body: { amount: 1000, currency: "USD", capture_method: "manual" },
            signal: signal(),
        }),
    );
    check(payment.amount === 1000 && payment.currency === "USD", `created: ${JSON.stringify(payment)}`);
    check(payment.profile_id === profile_id, `payment in shop ${payment.profile_id}`);
    check(payment.capture_method === "manual", `capture method ${payment.capture_method}`);
    const payment_id = payment.payment_id;

    const confirmed = await expect(
        "POST /payments/{payment_id}/confirm",
        200,
        shop.POST("/payments/{payment_id}/confirm", {
            params: { path: { payment_id } },
            body: {
                payment_method_data: {
                    card: { number: "4242424242424242", exp_month: 12, exp_year: 2035, cvc: "123" },
                },
            },
            signal: signal(),
        }),
    );
    check(confirmed.status === "requires_capture", `after confirm: status ${confirmed.status}`);
    check(confirmed.amount_capturable === 1000, `capturable ${confirmed.amount_capturable}`);

    const captured = await expect(
        "POST /payments/{payment_id}/capture",
        200,
        shop.POST("/payments/{payment_id}/capture", { params: { path: { payment_id } }, body: {}, signal: signal() }),
    );
    check(captured.status === "succeeded", `after capture: status ${captured.status}`);
    check(captured.amount_captured === 1000, `captured ${captured.amount_captured}`);

    const refund = await expect(
        "POST /refunds",
        201,
        shop.POST("/refunds", { body: { payment_id, amount: 400, reason: "smoke test" }, signal: signal() }),
    );
    check(refund.payment_id === payment_id && refund.amount === 400, `refund: ${JSON.stringify(refund)}`);
    check(refund.status === "succeeded", `refund status ${refund.status}, expected succeeded (card 4242…)`);

    // What the calls above announce, each with the object as it was right after the change.
    const expected = new Map<string, (event: PaymentEvent | RefundEvent) => string | undefined>([
        ["payment_authorized", (e) => paymentIs(e, "requires_capture", confirmed.version)],
        ["payment_succeeded", (e) => paymentIs(e, "succeeded", captured.version)],
        ["refund_succeeded", (e) => refundIs(e, refund.refund_id, refund.version)],
    ]);
    function paymentIs(event: PaymentEvent | RefundEvent, status: string, version: number) {
        if (event.content.type !== "payment_details") return `content.type ${event.content.type}`;
        const p = event.content.object;
        if (p.payment_id !== payment_id || p.status !== status || p.version !== version) {
            return `object ${p.payment_id} ${p.status} v${p.version}, expected ${payment_id} ${status} v${version}`;
        }
    }
    function refundIs(event: PaymentEvent | RefundEvent, refund_id: string, version: number) {
        if (event.content.type !== "refund_details") return `content.type ${event.content.type}`;
        const r = event.content.object;
        if (r.refund_id !== refund_id || r.amount !== 400 || r.version !== version) {
            return `object ${r.refund_id} ${r.amount} v${r.version}, expected ${refund_id} 400 v${version}`;
        }
    }

    const deadline = Date.now() + DELIVERY_WAIT_MS;
    const seen = new Set<string>();
    let checked = 0;
    while (seen.size < expected.size) {
        for (; checked < deliveries.length; checked++) {
            const { headers, body } = deliveries[checked];
            let event: PaymentEvent | RefundEvent;
            try {
                event = webhook.verify(body, headers) as PaymentEvent | RefundEvent;
            } catch (err) {
                fail(`delivery ${headers["webhook-id"]}: the signature does not verify: ${String(err)}`);
            }
            check(event.event_id === headers["webhook-id"], `webhook-id ${headers["webhook-id"]} for ${event.event_id}`);
            check(event.merchant_id === merchant.merchant_id, `event of merchant ${event.merchant_id}`);
            const judge = expected.get(event.event_type);
            check(judge !== undefined, `unexpected event ${event.event_type}: ${body.toString()}`);
            const wrong = judge(event);
            check(wrong === undefined, `${event.event_type} ${event.event_id}: ${wrong}`);
            check(!seen.has(event.event_type), `${event.event_type} delivered twice`);
            seen.add(event.event_type);
            console.log(`ok  delivered and verified: ${event.event_type} ${event.event_id}`);

            // The library must refuse what payd did not sign.
            const tampered = Buffer.concat([body, Buffer.from(" ")]);
            let refused = false;
            try {
                webhook.verify(tampered, headers);
            } catch {
                refused = true;
            }
            check(refused, "a tampered body verified: the check above proves nothing");
        }
        if (seen.size === expected.size) break;
        if (Date.now() > deadline) {
            const missing = [...expected.keys()].filter((t) => !seen.has(t));
            fail(`no delivery of ${missing.join(", ")} within ${DELIVERY_WAIT_MS / 1000} s`);
        }
        await new Promise((resolve) => setTimeout(resolve, 200));
    }

    console.log(
        `TypeScript client smoke test passed: merchant ${merchant.merchant_id}, payment ${payment_id} ` +
            `requires_capture -> ${captured.status}, refund ${refund.refund_id} ${refund.status}, ` +
            `${seen.size} events delivered and verified`,
    );
}
