// Scanning a code's QR with the phone's camera, where the browser has a
// BarcodeDetector; typing always works. No inline script: the page's
// Content Security Policy allows only scripts from the shop itself.
(function () {
  "use strict";
  var button = document.getElementById("scan");
  var video = document.getElementById("camera");
  var field = document.getElementById("code");
  var form = document.getElementById("redeem");
  if (!button || !video || !field || !form) return;
  // a hardware scanner types the code and Enter: the field keeps focus
  // between scans, unless staff are typing elsewhere on the page
  function ready() {
    var active = document.activeElement;
    var elsewhere = active && active !== field && /^(INPUT|TEXTAREA|SELECT)$/.test(active.tagName);
    if (!elsewhere) field.focus();
  }
  ready();
  window.addEventListener("focus", ready);
  document.addEventListener("click", function (event) {
    if (!event.target.closest("a, button, input, label, select, textarea")) ready();
  });
  if (!("BarcodeDetector" in window) || !navigator.mediaDevices) return;
  button.hidden = false;
  button.addEventListener("click", function () {
    var detector = new window.BarcodeDetector({ formats: ["qr_code"] });
    navigator.mediaDevices
      .getUserMedia({ video: { facingMode: "environment" } })
      .then(function (stream) {
        video.srcObject = stream;
        video.hidden = false;
        return video.play().then(function () {
          function look() {
            detector
              .detect(video)
              .then(function (found) {
                if (found.length > 0) {
                  stream.getTracks().forEach(function (t) { t.stop(); });
                  field.value = found[0].rawValue;
                  form.submit();
                } else {
                  window.requestAnimationFrame(look);
                }
              })
              .catch(function () { window.requestAnimationFrame(look); });
          }
          look();
        });
      })
      .catch(function () {
        button.hidden = true;
      });
  });
})();
