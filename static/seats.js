// The seat map follows the shop's stream (/availability/stream, the shop's
// memory): when the section's free seats change (someone took seats, or
// gave them back), the map is read again, keeping the seats picked (they
// are in its address). A shopper moving through the seats with the keyboard
// is not moved: the page says so instead, with a link to the map as it is
// now. No inline script: the page's policy allows only our own files.
(function () {
  "use strict";
  var map = document.querySelector("[data-section][data-available]");
  var said = document.getElementById("seats-changed");
  if (!map || !said || !window.EventSource) {
    return;
  }
  var id = map.getAttribute("data-section");
  var seen = map.getAttribute("data-available");
  var source = new EventSource("/availability/stream?ids=" + encodeURIComponent(id));
  source.onmessage = function (event) {
    var body;
    try {
      body = JSON.parse(event.data);
    } catch (e) {
      return;
    }
    (body.products || []).forEach(function (product) {
      if (product.id !== id || String(product.available) === seen) {
        return;
      }
      seen = String(product.available);
      if (map.contains(document.activeElement)) {
        said.hidden = false;
      } else {
        source.close();
        window.location.reload();
      }
    });
  };
})();
