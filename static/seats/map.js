// The seat map follows its section's seats (/seats/{section}/stream, from
// the shop's memory): a seat someone takes goes grey where it is, a seat
// given back becomes a link again, and the seats picked are kept (a picked
// seat taken meanwhile is put back, and the status line says so). Nothing
// is reloaded, so a shopper moving through the seats with the keyboard
// keeps their place. No inline script: the page's policy allows only our
// own files.
(function () {
  "use strict";
  var map = document.querySelector("svg[data-section]");
  var said = document.getElementById("seats-changed");
  if (!map || !said || !window.EventSource) {
    return;
  }
  var SVG = "http://www.w3.org/2000/svg";
  var id = map.getAttribute("data-section");
  var colour = map.getAttribute("data-colour");
  var totals = (map.getAttribute("data-totals") || "").split("|");
  var picked = (map.getAttribute("data-picked") || "").split(",").filter(Boolean);
  var count = document.getElementById("seats-free");
  var first = true;

  function seats() {
    return Array.prototype.slice.call(map.querySelectorAll("[data-seat]"));
  }
  function byLabel() {
    var out = {};
    seats().forEach(function (el) {
      out[el.getAttribute("data-seat")] = el;
    });
    return out;
  }
  function href(label) {
    var next = picked.filter(function (p) {
      return p !== label;
    });
    if (next.length === picked.length) {
      next.push(label);
    }
    var base = "/seats/" + id;
    return (next.length ? base + "?pick=" + next.map(encodeURIComponent).join(",") : base) + "#map";
  }
  function words(list) {
    var shown = list.slice(0, 6).join(", ");
    return list.length > 6 ? shown + " and " + (list.length - 6) + " more" : shown;
  }

  // the seat drawn again, free (a link) or taken (an image)
  function redraw(old, free) {
    var dot = old.querySelector("circle");
    var x = dot.getAttribute("cx");
    var y = dot.getAttribute("cy");
    var label = old.getAttribute("data-seat");
    var place = old.getAttribute("data-place");
    var mark = old.getAttribute("data-mark");
    var el = document.createElementNS(SVG, free ? "a" : "g");
    el.setAttribute("data-seat", label);
    el.setAttribute("data-place", place);
    el.setAttribute("data-mark", mark || "");
    var seat = document.createElementNS(SVG, "circle");
    seat.setAttribute("cx", x);
    seat.setAttribute("cy", y);
    seat.setAttribute("r", "4.5");
    el.appendChild(seat);
    if (free) {
      el.setAttribute("href", href(label));
      el.setAttribute("aria-label", place + ", free");
      seat.setAttribute("class", "seat free");
      seat.setAttribute("fill", colour);
      if (mark) {
        var text = document.createElementNS(SVG, "text");
        text.setAttribute("class", "mark");
        text.setAttribute("x", x);
        text.setAttribute("y", String(parseFloat(y) + 2));
        text.setAttribute("text-anchor", "middle");
        text.setAttribute("aria-hidden", "true");
        text.textContent = mark;
        el.appendChild(text);
      }
    } else {
      el.setAttribute("role", "img");
      el.setAttribute("aria-label", place + ", taken");
      seat.setAttribute("class", "seat taken");
    }
    var focused = old.contains(document.activeElement);
    old.parentNode.replaceChild(el, old);
    if (focused) {
      // the focus stays where it was: on the seat, or the next free one
      var links = Array.prototype.slice.call(map.querySelectorAll("a[data-seat]"));
      var next = free ? el : links.filter(function (a) {
        return el.compareDocumentPosition(a) & Node.DOCUMENT_POSITION_FOLLOWING;
      })[0] || links[links.length - 1];
      if (next) {
        next.focus();
      }
    }
  }

  // the picks changed: every link's address, and the form that adds them
  function picksChanged() {
    map.querySelectorAll("a[data-seat]").forEach(function (a) {
      a.setAttribute("href", href(a.getAttribute("data-seat")));
    });
    var form = document.querySelector(".picked-seats");
    if (!form) {
      return;
    }
    if (!picked.length) {
      form.parentNode.removeChild(form);
      return;
    }
    form.querySelector("input[name=seats]").value = picked.join(",");
    var total = totals[picked.length] || "";
    form.querySelector("[role=status]").textContent =
      "Picked: " + picked.join(", ") + (total ? " (" + total + ")" : "");
    form.querySelector("button[type=submit]").textContent =
      picked.length === 1 ? "Add this seat to the basket" : "Add these " + picked.length + " seats to the basket";
  }

  function apply(change) {
    var drawn = byLabel();
    if (change.seats !== seats().length) {
      // the plan itself changed: the map is read again, unless the
      // shopper is moving through it
      if (!map.contains(document.activeElement)) {
        source.close();
        window.location.reload();
      }
      return;
    }
    var taken = {};
    (change.taken || []).forEach(function (label) {
      taken[label] = true;
    });
    var nowTaken = [];
    var nowFree = [];
    Object.keys(drawn).forEach(function (label) {
      var free = drawn[label].tagName.toLowerCase() === "a";
      var wantFree = change.full ? !taken[label] : free ? !taken[label] : change.free.indexOf(label) >= 0;
      if (free && !wantFree) {
        nowTaken.push(label);
      } else if (!free && wantFree) {
        nowFree.push(label);
      }
    });
    var lost = picked.filter(function (p) {
      return nowTaken.indexOf(p) >= 0;
    });
    picked = picked.filter(function (p) {
      return lost.indexOf(p) < 0;
    });
    nowTaken.forEach(function (label) {
      redraw(drawn[label], false);
    });
    nowFree.forEach(function (label) {
      redraw(drawn[label], true);
    });
    if (lost.length) {
      picksChanged();
    }
    if (count) {
      count.textContent = String(change.free_count);
    }
    var news = [];
    if (lost.length) {
      news.push(words(lost) + (lost.length === 1 ? ", which you picked, was" : ", which you picked, were") +
        " just taken: pick another.");
    } else if (nowTaken.length && !first && map.contains(document.activeElement)) {
      news.push(words(nowTaken) + (nowTaken.length === 1 ? " was" : " were") + " just taken.");
    }
    if (nowFree.length && !first && map.contains(document.activeElement)) {
      news.push(words(nowFree) + (nowFree.length === 1 ? " is" : " are") + " free again.");
    }
    if (news.length) {
      said.textContent = news.join(" ");
      said.hidden = false;
    }
    first = false;
  }

  var source = new EventSource("/seats/" + encodeURIComponent(id) + "/stream");
  source.onmessage = function (event) {
    var change;
    try {
      change = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    apply(change);
  };
})();
