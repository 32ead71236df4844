// The pay page's countdown: the page says until when the shopper's items
// are held (server-rendered, in the shop's time); this counts the minutes
// and seconds left beside it, and says so when the time is up. No inline
// script: the page's policy allows only our own files.
(function () {
  "use strict";

  var el = document.querySelector("[data-held-until]");
  if (!el) {
    return;
  }
  var until = Date.parse(el.getAttribute("data-held-until"));
  var out = el.querySelector(".left-time");
  if (isNaN(until) || !out) {
    return;
  }
  // the server's clock at render, against ours: a clock that is off by
  // minutes still counts the right time left
  var served = Date.parse(el.getAttribute("data-now"));
  var skew = isNaN(served) ? 0 : Date.now() - served;

  function two(n) {
    return (n < 10 ? "0" : "") + n;
  }

  function tick() {
    var left = Math.floor((until - (Date.now() - skew)) / 1000);
    if (left <= 0) {
      out.textContent = "Time is up: your items may have gone back on sale.";
      el.classList.add("over");
      return;
    }
    out.textContent = Math.floor(left / 60) + ":" + two(left % 60) + " left";
    setTimeout(tick, 1000);
  }
  tick();
})();
