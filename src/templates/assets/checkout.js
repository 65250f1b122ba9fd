// The hosted checkout's script, served from payd's own route with an integrity hash (the page
// allows no inline script). It reads the page's data from the JSON block #page-data, checks the
// card as the buyer types (grouping, brand, Luhn, expiry, CVC length) and sends nothing the
// page can tell is wrong. When a Stripe account takes the card (`data.stripe`), Stripe.js takes
// it instead, in its own field, and the page sends payd only what Stripe.js made of it.
(function () {
  "use strict";
  var data = JSON.parse(document.getElementById("page-data").textContent);
  var text = data.text;
  var form = document.getElementById("pay");
  var button = document.getElementById("submit");
  var label = document.getElementById("submit-label");
  var spinner = document.getElementById("spinner");
  var message = document.getElementById("message");
  var receipt = document.getElementById("receipt");
  var fields = {
    number: document.getElementById("number"),
    exp: document.getElementById("exp"),
    cvc: document.getElementById("cvc")
  };
  var brandMark = document.getElementById("brand");
  // Framed by a shop's page through /js/payd.js: the parent's origin, one the shop registered
  // (payd checked it), the only one this page posts to.
  var parentOrigin = data.embed_origin && window.parent !== window ? data.embed_origin : null;

  function toParent(message) {
    if (!parentOrigin) return;
    message.payd = "1";
    window.parent.postMessage(message, parentOrigin);
  }

  if (parentOrigin && typeof ResizeObserver === "function") {
    var main = document.querySelector("main");
    new ResizeObserver(function () {
      toParent({ type: "resize", height: Math.ceil(main.getBoundingClientRect().height + 2 * main.offsetTop) });
    }).observe(main);
  }
  // Stripe.js's card field, when a Stripe account takes the card.
  var stripe = data.stripe && typeof window.Stripe === "function" ? window.Stripe(data.stripe.publishable_key) : null;
  var stripeCard = null;
  if (stripe) {
    fields = {};
    stripeCard = stripe.elements().create("card");
    stripeCard.mount("#stripe-card");
    stripeCard.on("change", function (e) { problem("number", e && e.error ? e.error.message : ""); });
  }

  if (data.accent) {
    document.documentElement.style.setProperty("--accent", data.accent.color);
    document.documentElement.style.setProperty("--accent-text", data.accent.text);
  }

  // Brands by their numbers' prefixes: how a number is grouped, its lengths, its CVC's length.
  var BRANDS = [
    { id: "amex", name: "American Express", re: /^3[47]/, groups: [4, 6, 5], lengths: [15], cvc: 4 },
    { id: "diners", name: "Diners Club", re: /^3(0[0-5]|[689])/, groups: [4, 6, 4], lengths: [14, 15, 16, 17, 18, 19], cvc: 3 },
    { id: "visa", name: "Visa", re: /^4/, groups: [4, 4, 4, 4, 3], lengths: [13, 16, 19], cvc: 3 },
    { id: "mastercard", name: "Mastercard", re: /^(5[1-5]|2(22[1-9]|2[3-9]\d|[3-6]\d\d|7[01]\d|720))/, groups: [4, 4, 4, 4], lengths: [16], cvc: 3 },
    { id: "discover", name: "Discover", re: /^(6011|65|64[4-9])/, groups: [4, 4, 4, 4, 3], lengths: [16, 19], cvc: 3 },
    { id: "jcb", name: "JCB", re: /^35(2[89]|[3-8])/, groups: [4, 4, 4, 4, 3], lengths: [16, 17, 18, 19], cvc: 3 },
    { id: "unionpay", name: "UnionPay", re: /^62/, groups: [4, 4, 4, 4, 3], lengths: [16, 17, 18, 19], cvc: 3 }
  ];
  var UNKNOWN = { id: "unknown", name: "", groups: [4, 4, 4, 4, 3], lengths: [12, 13, 14, 15, 16, 17, 18, 19], cvc: 3 };

  function digits(s) { return s.replace(/\D/g, ""); }

  function brandOf(number) {
    for (var i = 0; i < BRANDS.length; i++) {
      if (BRANDS[i].re.test(number)) return BRANDS[i];
    }
    return UNKNOWN;
  }

  function luhn(number) {
    var sum = 0;
    for (var i = 0; i < number.length; i++) {
      var d = number.charCodeAt(number.length - 1 - i) - 48;
      if (i % 2 === 1) { d *= 2; if (d > 9) d -= 9; }
      sum += d;
    }
    return sum % 10 === 0;
  }

  function grouped(number, brand) {
    var out = [], at = 0;
    for (var i = 0; i < brand.groups.length && at < number.length; i++) {
      out.push(number.slice(at, at + brand.groups[i]));
      at += brand.groups[i];
    }
    if (at < number.length) out.push(number.slice(at));
    return out.join(" ");
  }

  function say(template, values) {
    return template.replace(/\{(\w+)\}/g, function (_, k) { return values[k] === undefined ? "" : values[k]; });
  }

  // Rewrites an input's value, keeping the caret after the same number of digits.
  function reformat(input, value) {
    if (input.value === value) return;
    var caret = input.selectionStart === null ? input.value.length : input.selectionStart;
    var before = digits(input.value.slice(0, caret)).length;
    input.value = value;
    var pos = 0, seen = 0;
    while (pos < value.length && seen < before) {
      if (/\d/.test(value.charAt(pos))) seen++;
      pos++;
    }
    if (document.activeElement === input) input.setSelectionRange(pos, pos);
  }

  function problem(name, words) {
    var p = document.getElementById(name + "-problem");
    p.textContent = words || "";
    var field = fields[name] || document.getElementById("stripe-card");
    field.setAttribute("aria-invalid", words ? "true" : "false");
  }

  // Each check answers the problem with a field's value, or "" when there is none.
  function numberProblem(final) {
    var n = digits(fields.number.value);
    var brand = brandOf(n);
    if (!n) return final ? text.number_missing : "";
    var max = Math.max.apply(null, brand.lengths);
    if (n.length > max) return text.number_invalid;
    if (n.length < max && !final) return "";
    if (brand.lengths.indexOf(n.length) < 0 || !luhn(n)) return text.number_invalid;
    return "";
  }

  function expiry() {
    var m = fields.exp.value.match(/^\s*(\d{1,2})\s*\/?\s*(\d{2}|\d{4})\s*$/);
    if (!m) return null;
    var month = parseInt(m[1], 10), year = parseInt(m[2], 10);
    if (year < 100) year += 2000;
    return { month: month, year: year };
  }

  function expProblem(final) {
    if (!digits(fields.exp.value)) return final ? text.exp_missing : "";
    var e = expiry();
    if (!e) return final ? text.exp_invalid : "";
    if (e.month < 1 || e.month > 12) return text.exp_invalid;
    var now = new Date();
    if (e.year < now.getFullYear() || (e.year === now.getFullYear() && e.month < now.getMonth() + 1)) {
      return text.exp_past;
    }
    return "";
  }

  function cvcProblem(final) {
    var c = digits(fields.cvc.value);
    var want = brandOf(digits(fields.number.value)).cvc;
    if (!c) return final ? text.cvc_missing : "";
    if (c.length > want || (final && c.length !== want)) return say(text.cvc_invalid, { n: want });
    return "";
  }

  var CHECKS = stripe ? {} : { number: numberProblem, exp: expProblem, cvc: cvcProblem };

  if (!stripe) {
  fields.number.addEventListener("input", function () {
    var n = digits(fields.number.value).slice(0, 19);
    var brand = brandOf(n);
    reformat(fields.number, grouped(n, brand));
    brandMark.textContent = brand.name;
    brandMark.setAttribute("data-brand", brand.id);
    fields.cvc.setAttribute("maxlength", String(brand.cvc));
    problem("number", numberProblem(false));
    var max = Math.max.apply(null, brand.lengths);
    if (n.length === max && !numberProblem(true)) fields.exp.focus();
  });

  fields.exp.addEventListener("input", function (e) {
    var d = digits(fields.exp.value).slice(0, 4);
    var deleting = e.inputType && e.inputType.indexOf("delete") === 0;
    if (d.length === 1 && d > "1") d = "0" + d;
    var v = d.length > 2 || (d.length === 2 && !deleting) ? d.slice(0, 2) + " / " + d.slice(2) : d;
    reformat(fields.exp, v);
    problem("exp", expProblem(false));
    if (d.length === 4 && !expProblem(true)) fields.cvc.focus();
  });

  fields.cvc.addEventListener("input", function () {
    reformat(fields.cvc, digits(fields.cvc.value).slice(0, 4));
    problem("cvc", cvcProblem(false));
  });

  Object.keys(fields).forEach(function (name) {
    fields[name].addEventListener("blur", function () {
      if (fields[name].value) problem(name, CHECKS[name](true));
    });
  });
  }

  function busy(on) {
    button.disabled = on;
    button.setAttribute("aria-busy", on ? "true" : "false");
    spinner.hidden = !on;
    label.textContent = on ? text.paying : data.pay_label;
  }

  function tell(kind, words) {
    message.className = kind;
    message.setAttribute("role", kind === "error" ? "alert" : "status");
    message.textContent = words;
  }

  function declined(status) {
    var code = status.last_error && status.last_error.code;
    return text["declined_" + code] || text.declined;
  }

  function backToShop(status) {
    var url = new URL(status.return_url, location.href);
    url.searchParams.set("payment_id", status.payment_id);
    url.searchParams.set("status", status.status);
    return url.toString();
  }

  // A page of payd's the buyer goes on to keeps the frame's parent.
  function framedUrl(href) {
    var url = new URL(href, location.href);
    if (parentOrigin && url.origin === location.origin) url.searchParams.set("embed_origin", parentOrigin);
    return url.toString();
  }

  function paid(status) {
    form.hidden = true;
    tell("", "");
    receipt.hidden = false;
    var pending = status.status === "processing" || status.status === "requires_merchant_action";
    document.getElementById("receipt-title").textContent = pending ? text.received : text.paid;
    document.getElementById("receipt-status").textContent = pending ? text.status_processing : text.status_paid;
    // Framed, the shop's page takes the buyer on (payd.js's onComplete).
    if (status.return_url && !parentOrigin) {
      var link = document.getElementById("return");
      link.href = backToShop(status);
      link.hidden = false;
      setTimeout(function () { location.href = link.href; }, 2500);
    }
    receipt.focus();
  }

  function show(status) {
    document.body.setAttribute("data-status", status.status);
    toParent({ type: "status", payment_id: status.payment_id, status: status.status });
    var done = ["succeeded", "requires_capture", "partially_authorized_and_requires_capture", "processing", "requires_merchant_action"];
    if (done.indexOf(status.status) >= 0) {
      paid(status);
    } else if (status.status === "requires_customer_action" && status.next_action_url) {
      location.href = framedUrl(status.next_action_url);
    } else if (status.status === "declined") {
      form.hidden = false;
      tell("error", declined(status));
      busy(false);
      if (stripe) {
        if (typeof stripeCard.clear === "function") stripeCard.clear();
        if (typeof stripeCard.focus === "function") stripeCard.focus();
        return;
      }
      fields.number.value = "";
      fields.cvc.value = "";
      brandMark.textContent = "";
      brandMark.setAttribute("data-brand", "");
      fields.number.focus();
    } else if (status.status === "requires_payment_method" || status.status === "requires_confirmation") {
      form.hidden = false;
      // Stripe.js did not load (blocked, offline): the card cannot be taken here.
      if (data.stripe && !stripe) {
        form.hidden = true;
        tell("error", text.network);
      }
    } else {
      form.hidden = true;
      tell("error", text.cannot_pay);
    }
  }

  // A field the server refused (its `param`: `card.number`, `card.exp_month`, …) gets its message
  // beside it.
  function refused(error) {
    var field = (error && error.param) || "";
    var name = /number/.test(field) ? "number" : /exp/.test(field) ? "exp" : /cvc/.test(field) ? "cvc" : null;
    if (name) {
      problem(name, error.message);
      fields[name].focus();
    } else {
      tell("error", (error && error.message) || text.failed);
    }
  }

  // What Stripe.js made of the card: a PaymentMethod, or (from a Stripe.js without
  // createPaymentMethod) a card token. Stripe's own message when it refuses the card.
  function stripeMethod() {
    var made = typeof stripe.createPaymentMethod === "function"
      ? stripe.createPaymentMethod({ type: "card", card: stripeCard }) : null;
    return Promise.resolve(made).then(function (r) {
      if (r && r.error) throw r.error;
      if (r && r.paymentMethod) return { payment_method: r.paymentMethod.id };
      return stripe.createToken(stripeCard).then(function (t) {
        if (t.error) throw t.error;
        return { token: t.token.id };
      });
    }).then(function (made) {
      made.processor_account_id = data.stripe.processor_account_id;
      return { client_secret: data.client_secret, stripe: made };
    });
  }

  // The card typed into payd's own fields, checked; null (and the field told) if it is wrong.
  function typedCard() {
    var first = null;
    ["number", "exp", "cvc"].forEach(function (name) {
      var words = CHECKS[name](true);
      problem(name, words);
      if (words && !first) first = name;
    });
    if (first) { fields[first].focus(); return null; }
    var exp = expiry();
    return {
      client_secret: data.client_secret,
      card: {
        number: digits(fields.number.value),
        exp_month: exp.month,
        exp_year: exp.year,
        cvc: digits(fields.cvc.value)
      }
    };
  }

  form.addEventListener("submit", function (e) {
    e.preventDefault();
    tell("", "");
    var body;
    if (stripe) {
      busy(true);
      body = stripeMethod();
    } else {
      var card = typedCard();
      if (!card) return;
      busy(true);
      body = Promise.resolve(card);
    }
    body.then(function (b) {
      return fetch("/checkout/" + encodeURIComponent(data.payment_id) + "/confirm", {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(b)
      });
    }, function (stripeError) {
      throw { stripe: stripeError };
    }).then(function (r) {
      return r.json().then(function (j) { return { ok: r.ok, body: j }; });
    }).then(function (res) {
      if (res.ok) { show(res.body); if (res.body.status !== "declined") busy(false); return; }
      busy(false);
      refused(res.body.error);
    }).catch(function (failure) {
      busy(false);
      if (failure && failure.stripe) {
        problem("number", failure.stripe.message || text.number_invalid);
      } else {
        tell("error", text.network);
      }
    });
  });

  label.textContent = data.pay_label;
  show(data.status);
})();
