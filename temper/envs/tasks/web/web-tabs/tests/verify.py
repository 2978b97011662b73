"""Click the tabs, then drive them from the keyboard on fresh pages, and score each requirement of the
instruction, one reward component each."""

import webcheck

NAMES = ["overview", "specs", "reviews"]
TEXTS = {"overview": "Overview", "specs": "Specs", "reviews": "Reviews"}
PANELS = {"overview": "A light, fast laptop.", "specs": "16 GB of memory and a 1 TB disk.",
          "reviews": "Rated 4.5 out of 5 by 212 buyers."}
ROLES = """() => { const lists = document.querySelectorAll('[role="tablist"]');
  const ids = els => [...els].map(e => ({id: e.id, text: e.innerText.trim(), controls: e.getAttribute('aria-controls'),
                                         labelledby: e.getAttribute('aria-labelledby')}));
  return {lists: lists.length, tabs: lists.length === 1 ? ids(lists[0].querySelectorAll('[role="tab"]')) : [],
          panels: ids(document.querySelectorAll('[role="tabpanel"]'))}; }"""
STATE = """() => ({focus: document.activeElement ? document.activeElement.id : null,
  tabs: ['overview', 'specs', 'reviews'].map(n => { const t = document.getElementById('tab-' + n);
    return t ? {selected: t.getAttribute('aria-selected'), tabindex: t.tabIndex} : null; }),
  panels: ['overview', 'specs', 'reviews'].map(n => { const p = document.getElementById('panel-' + n);
    return p ? {shown: p.getClientRects().length > 0 && getComputedStyle(p).visibility !== 'hidden',
                text: p.innerText} : null; })})"""


def selected(s: dict, name: str, focused: bool = False) -> bool:
    """`name` is the one selected tab and its panel the one shown (with its text); focused, if asked."""
    i = NAMES.index(name)
    return (None not in s["tabs"] and None not in s["panels"]
            and [t["selected"] for t in s["tabs"]] == ["true" if j == i else "false" for j in range(3)]
            and [p["shown"] for p in s["panels"]] == [j == i for j in range(3)]
            and PANELS[name] in s["panels"][i]["text"] and (not focused or s["focus"] == f"tab-{name}"))


def roving(s: dict) -> bool:
    """The selected tab has tabIndex 0, the others -1."""
    return (None not in s["tabs"] and [t["selected"] for t in s["tabs"]].count("true") == 1
            and all(t["tabindex"] == (0 if t["selected"] == "true" else -1) for t in s["tabs"]))


def keys(c: webcheck.Checks, presses: list[str]) -> list[dict]:
    """On a fresh page: focus the Overview tab, press each key in turn; the state after each."""
    page = c.open("index.html", width=1000, height=700)
    if page.locator("#tab-overview").count() != 1:
        return []
    page.locator("#tab-overview").focus()
    out = []
    for key in presses:
        page.keyboard.press(key)
        out.append(page.evaluate(STATE))
    return out


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)
    roles = page.evaluate(ROLES)
    c.score("roles", roles["lists"] == 1
            and [(t["id"], t["text"], t["controls"]) for t in roles["tabs"]] == [(f"tab-{n}", TEXTS[n], f"panel-{n}")
                                                                                for n in NAMES]
            and sorted((p["id"], p["labelledby"]) for p in roles["panels"]) == sorted((f"panel-{n}", f"tab-{n}")
                                                                                      for n in NAMES))
    start = page.evaluate(STATE)
    c.score("initial_state", selected(start, "overview"))
    seen = [start]
    clicked = []
    for name in ("reviews", "specs", "overview"):
        if page.locator(f"#tab-{name}").count() == 1:
            page.locator(f"#tab-{name}").click()
        clicked.append(page.evaluate(STATE))
    seen += clicked
    c.score("click", all(selected(s, n) for s, n in zip(clicked, ("reviews", "specs", "overview"), strict=True)))
    if page.locator("#tab-specs").count() == 1:
        page.locator("#tab-specs").click()
    c.screenshot(page)
    right = keys(c, ["ArrowRight"] * 3)
    c.score("arrow_right", len(right) == 3 and all(selected(s, n, focused=True)
                                                  for s, n in zip(right, ("specs", "reviews", "overview"), strict=True)))
    left = keys(c, ["ArrowLeft"] * 2)
    c.score("arrow_left", len(left) == 2 and all(selected(s, n, focused=True)
                                                for s, n in zip(left, ("reviews", "specs"), strict=True)))
    c.score("roving_tabindex", selected(start, "overview") and all(roving(s) for s in [*seen, *right, *left]))


webcheck.run(["roles", "initial_state", "click", "arrow_right", "arrow_left", "roving_tabindex", "no_console_errors"],
             check)
