// The sandbox 3-D Secure challenge page's script, served from payd's own route with an
// integrity hash (the page allows no inline script). Its data is the JSON block #page-data.
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
  var back = "/checkout/" + encodeURIComponent(data.payment_id) +
    "?client_secret=" + encodeURIComponent(data.client_secret);

  function answer(result) {
    approve.disabled = true;
    reject.disabled = true;
    fetch("/checkout/" + encodeURIComponent(data.payment_id) + "/challenge", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ client_secret: data.client_secret, result: result })
    }).then(function (r) {
      if (!r.ok) throw new Error("status " + r.status);
      location.href = back;
    }).catch(function () {
      message.className = "error";
      message.textContent = data.text.failed;
      approve.disabled = false;
      reject.disabled = false;
    });
  }
  approve.addEventListener("click", function () { answer("approve"); });
  reject.addEventListener("click", function () { answer("reject"); });
})();
