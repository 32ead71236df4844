// A drop queue's page: recompute every rank with the browser's own
// cryptography (SHA-256 of the seed against the commitment, then
// HMAC-SHA256(seed, entry id) for each entry) and check that the order
// shown is the seed's order. Nothing here trusts the shop's numbers.
(async () => {
  const verdict = document.getElementById("verdict");
  const seedHex = document.getElementById("seed");
  if (!verdict || !seedHex || !window.crypto || !crypto.subtle) return;
  const bytes = (hex) => new Uint8Array(hex.match(/../g).map((h) => parseInt(h, 16)));
  const hex = (buf) => [...new Uint8Array(buf)].map((b) => b.toString(16).padStart(2, "0")).join("");
  const seed = bytes(seedHex.textContent.trim());
  const commitment = document.getElementById("commitment").textContent.trim();
  if (hex(await crypto.subtle.digest("SHA-256", seed)) !== commitment) {
    verdict.textContent = "The seed does NOT match the commitment published before the draw.";
    verdict.className = "notice refused";
    return;
  }
  const key = await crypto.subtle.importKey("raw", seed, { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
  const rows = [...document.querySelectorAll("#order tbody tr")];
  const enc = new TextEncoder();
  const ranked = [];
  for (const row of rows) {
    const id = row.querySelector(".entry").textContent.trim();
    ranked.push([hex(await crypto.subtle.sign("HMAC", key, enc.encode(id))), id]);
  }
  const shown = ranked.map(([, id]) => id);
  ranked.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : 1));
  const bad = ranked.findIndex(([, id], i) => id !== shown[i]);
  if (bad >= 0) {
    verdict.textContent = `Place ${bad + 1} is NOT the seed's: the seed puts ${ranked[bad][1]} there.`;
    verdict.className = "notice refused";
  } else {
    verdict.textContent = `Checked in your browser: all ${rows.length} places are the seed's order, and the seed matches the commitment.`;
    verdict.className = "notice verified";
  }
})();
