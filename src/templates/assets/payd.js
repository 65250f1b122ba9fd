// payd.js: embeds a payment's card form (payd's hosted checkout page) in a merchant's page.
// The card is typed into payd's page, inside an iframe, so it never touches the merchant's
// page. Served by payd at /js/payd.js; no build step:
//
//   <div id="pay"></div>
//   <script src="https://pay.example.com/js/payd.js"></script>
//   <script>
//     Payd.mount("#pay", {
//       checkoutUrl: payment.checkout_url,           // from POST /payments, made server-side
//       onComplete: function (p) { /* p.payment_id, p.status: show "thank you" */ }
//     });
//   </script>
//
// The merchant's page must be on one of the shop's `embed_origins` (PUT /account/shops/{id}):
// payd's page refuses to be framed anywhere else. The page tells this script the payment's
// status by postMessage, sent to the merchant's origin only; this script takes messages only
// from payd's origin and its own frame. A status seen here is for the buyer's eyes: fulfil an
// order on the signed webhook (payment_succeeded), never on this.
(function () {
  "use strict";
  var PROTOCOL = "1";
  var script = document.currentScript;
  var origin = script ? new URL(script.src, location.href).origin : null;
  // What the page reports once the buyer is done: paid, authorized, or in the processor's hands.
  var DONE = ["succeeded", "requires_capture", "partially_authorized_and_requires_capture", "processing", "requires_merchant_action"];

  function mount(target, options) {
    if (!origin) throw new Error("payd.js: load it with a <script src> tag");
    options = options || {};
    var container = typeof target === "string" ? document.querySelector(target) : target;
    if (!container) throw new Error("payd.js: no element " + target);
    var url = new URL(String(options.checkoutUrl || ""), origin);
    if (url.origin !== origin || !/^\/checkout\/[^/]+$/.test(url.pathname) || !url.searchParams.get("client_secret")) {
      throw new Error("payd.js: checkoutUrl must be a payment's checkout_url on " + origin);
    }
    url.searchParams.set("embed_origin", location.origin);
    var frame = document.createElement("iframe");
    frame.src = url.toString();
    frame.title = options.title || "Card payment";
    frame.setAttribute("allow", "payment");
    frame.setAttribute("referrerpolicy", "no-referrer");
    frame.style.border = "0";
    frame.style.width = "100%";
    frame.style.display = "block";
    frame.style.height = (options.height || 520) + "px";

    var completed = false;
    function onMessage(e) {
      if (e.origin !== origin || e.source !== frame.contentWindow) return;
      var m = e.data;
      if (!m || typeof m !== "object" || m.payd !== PROTOCOL) return;
      if (m.type === "resize" && typeof m.height === "number" && m.height > 0 && m.height < 10000) {
        frame.style.height = Math.ceil(m.height) + "px";
      } else if (m.type === "status" && typeof m.status === "string") {
        var detail = { payment_id: String(m.payment_id), status: m.status };
        container.dispatchEvent(new CustomEvent("payd:status", { detail: detail, bubbles: true }));
        if (typeof options.onStatus === "function") options.onStatus(detail);
        if (DONE.indexOf(m.status) >= 0 && !completed) {
          completed = true;
          container.dispatchEvent(new CustomEvent("payd:complete", { detail: detail, bubbles: true }));
          if (typeof options.onComplete === "function") options.onComplete(detail);
        }
      }
    }
    window.addEventListener("message", onMessage);
    container.appendChild(frame);
    return {
      frame: frame,
      unmount: function () {
        window.removeEventListener("message", onMessage);
        if (frame.parentNode) frame.parentNode.removeChild(frame);
      }
    };
  }

  window.Payd = { version: PROTOCOL, origin: origin, mount: mount };
})();
