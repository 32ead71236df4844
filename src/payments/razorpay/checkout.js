// Opens Razorpay Checkout with the options our pay page carries as JSON
// (templates/pay.html). Served at /static/pay/razorpay.js, kept out of the
// page so the Content Security Policy needs no inline script.
document.getElementById('pay-button').addEventListener('click', function () {
  var options = JSON.parse(document.getElementById('pay-options').textContent);
  new Razorpay(options).open();
});
