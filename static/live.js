// Live availability. While something on the page is sold out, watch what
// is left and what is pending: a stream of server-sent events from the
// shop's memory (/availability/stream), or, where there is none or the shop
// is too busy to keep one open, a question every ten seconds or so. When
// units come back, say so (the basket) or show them (a product page,
// reloaded), or, on a place in line, reload it when anything held or left
// changes. No inline script: the page's policy allows only our own files.
(function () {
  "use strict";

  var EVERY_MS = 10000;
  var JITTER_MS = 3000;
  var items = Array.prototype.slice.call(
    document.querySelectorAll("[data-product][data-available]")
  );

  function soldOut() {
    return items.filter(function (el) {
      return el.getAttribute("data-available") === "0";
    });
  }

  function clock(iso) {
    return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  function pendingNote(product) {
    if (product.pending <= 0) {
      return "";
    }
    // the shop's own wording of the time, in the shop's zone
    var back = product.first_back_at && new Date(product.first_back_at) > new Date()
      ? "by " + (product.first_back || clock(product.first_back_at))
      : "any moment now";
    return "Sold out for now: " + product.pending + " reserved by shoppers who are paying. " +
      "If they do not finish, the first come back " + back + ".";
  }

  function apply(products) {
    var reload = false;
    products.forEach(function (product) {
      items.forEach(function (el) {
        if (el.getAttribute("data-product") !== product.id) {
          return;
        }
        var note = el.querySelector(".live-note");
        if (el.getAttribute("data-when-changed") === "reload") {
          // a place in line: any change to what is held or left may move it
          var was = el.getAttribute("data-first-back") || "";
          var now = product.first_back_at || "";
          if (String(product.available) !== el.getAttribute("data-available") ||
              String(product.pending) !== el.getAttribute("data-pending") ||
              (was ? new Date(was).getTime() : 0) !== (now ? new Date(now).getTime() : 0)) {
            reload = true;
          }
          return;
        }
        if (product.available > 0) {
          el.setAttribute("data-available", String(product.available));
          if (el.getAttribute("data-when-back") === "reload") {
            reload = true;
          } else if (note) {
            note.textContent = "Back on sale: " + product.available +
              " left. Press Pay to try again.";
          }
        } else if (note) {
          note.textContent = pendingNote(product);
        }
      });
    });
    if (reload) {
      window.location.reload();
    }
  }

  function schedule() {
    if (soldOut().length > 0) {
      window.setTimeout(poll, EVERY_MS + Math.random() * JITTER_MS);
    }
  }

  function poll() {
    var watched = soldOut();
    if (watched.length === 0) {
      return;
    }
    if (document.hidden) {
      schedule();
      return;
    }
    var ids = watched.map(function (el) { return el.getAttribute("data-product"); });
    fetch("/availability?ids=" + encodeURIComponent(ids.join(",")), {
      headers: { Accept: "application/json" },
      credentials: "omit"
    })
      .then(function (answer) { return answer.ok ? answer.json() : null; })
      .then(function (body) {
        if (body && body.products) {
          apply(body.products);
        }
      })
      .catch(function () { /* the next poll tries again */ })
      .then(schedule);
  }

  function watch() {
    var watched = soldOut();
    if (watched.length === 0) {
      return;
    }
    if (!window.EventSource) {
      schedule();
      return;
    }
    var ids = watched.map(function (el) { return el.getAttribute("data-product"); });
    var source = new EventSource("/availability/stream?ids=" + encodeURIComponent(ids.join(",")));
    source.onmessage = function (event) {
      try {
        var body = JSON.parse(event.data);
        if (body && body.products) {
          apply(body.products);
        }
      } catch (e) { /* the next event says it again */ }
      if (soldOut().length === 0) {
        source.close();
      }
    };
    source.onerror = function () {
      // the browser tries again by itself unless the shop said no
      if (source.readyState === 2) {
        schedule();
      }
    };
  }

  watch();
})();
