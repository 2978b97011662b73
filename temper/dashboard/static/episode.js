// Colours the episode's tokens by the chosen quantity: behaviour logprob (low = red), advantage (blue
// positive, red negative), loss mask (sampled tokens), or policy version (one hue per version).
"use strict";
(function () {
  const toks = [...document.querySelectorAll("#turns .tok")];
  const versions = [...new Set(toks.filter((t) => t.dataset.m === "1").map((t) => t.dataset.v))].sort();
  function colour(mode) {
    for (const t of toks) {
      let bg = "";
      const sampled = t.dataset.m === "1";
      if (mode === "logprob" && sampled) {
        const p = Math.exp(Number(t.dataset.lp));            // 1 = certain, 0 = surprising
        bg = `rgba(192,57,43,${(0.65 * (1 - p)).toFixed(3)})`;
      } else if (mode === "adv" && t.dataset.adv !== undefined) {
        const a = Math.max(-1, Math.min(1, Number(t.dataset.adv) / 2));
        bg = a >= 0 ? `rgba(42,111,219,${(0.6 * a).toFixed(3)})` : `rgba(192,57,43,${(-0.6 * a).toFixed(3)})`;
      } else if (mode === "mask" && sampled) {
        bg = "rgba(30,132,73,0.25)";
      } else if (mode === "version" && sampled) {
        bg = `hsla(${(versions.indexOf(t.dataset.v) * 67) % 360},70%,60%,0.35)`;
      }
      t.style.background = bg;
    }
    document.getElementById("turns").dataset.colour = mode;
  }
  document.querySelectorAll('input[name="colour"]').forEach((r) => r.addEventListener("change", () => colour(r.value)));
  colour("logprob");
})();
