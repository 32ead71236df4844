// Opens Razorpay Checkout with the options the page carries as JSON. Kept
// out of the page so the Content Security Policy needs no inline script.
document.getElementById('rzp-pay').addEventListener('click', function () {
  var options = JSON.parse(document.getElementById('rzp-options').textContent);
  new Razorpay(options).open();
});
