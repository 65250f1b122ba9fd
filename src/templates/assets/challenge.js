// The 3-D Secure challenge page's script (the sandbox's challenge, or the way on to the
// bank's), served from payd's own route with an integrity hash (the page allows no inline
// script). Its data is the JSON block #page-data.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("page-data").textContent);
  var approve = document.getElementById("approve");
  var reject = document.getElementById("reject");
  var message = document.getElementById("message");
  if (data.accent) {
    document.documentElement.style.setProperty("--accent", data.accent.color);
    document.documentElement.style.setProperty("--accent-text", data.accent.text);
  }
  if (!approve) return;
  // Framed by a shop's page (payd.js), the checkout page it goes back to stays framed.
  var back = "/checkout/" + encodeURIComponent(data.payment_id) +
    "?client_secret=" + encodeURIComponent(data.client_secret) +
    (data.embed_origin ? "&embed_origin=" + encodeURIComponent(data.embed_origin) : "");

  // Only approve where the bank's own page follows (an off-session charge to authenticate):
  // the answer then names that page.
  var buttons = [approve, reject].filter(Boolean);

  function answer(result) {
    buttons.forEach(function (b) { b.disabled = true; });
    fetch("/checkout/" + encodeURIComponent(data.payment_id) + "/challenge", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ client_secret: data.client_secret, result: result })
    }).then(function (r) {
      if (!r.ok) throw new Error("status " + r.status);
      return r.json();
    }).then(function (status) {
      location.href = (status.status === "requires_customer_action" && status.next_action_url) || back;
    }).catch(function () {
      message.className = "error";
      message.textContent = data.text.failed;
      buttons.forEach(function (b) { b.disabled = false; });
    });
  }
  approve.addEventListener("click", function () { answer("approve"); });
  if (reject) reject.addEventListener("click", function () { answer("reject"); });
})();
