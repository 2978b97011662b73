"""Look for the labels and the real button, use the button by mouse and keyboard, and score each requirement of
the instruction, one reward component each (the starting page, unchanged, scores 0 on all of them)."""

import re

import webcheck

FIELDS = [("name", "text", "Name"), ("email", "email", "Email"), ("message", "textarea", "Message"),
          ("subscribe", "checkbox", "Send me the newsletter")]
TEXT = "Contact us Name Email Message Send me the newsletter Send"  # the page's visible words, as shipped
CONTROLS = """() => [...document.querySelectorAll('input, textarea, select')].map(e => ({id: e.id, type: e.type,
  labels: [...(e.labels || [])].filter(l => l.tagName === 'LABEL').map(l => l.innerText.trim())}))"""
WORDS = "() => document.body.innerText.split(/\\s+/).filter(Boolean).join(' ')"
AFTER_FIELDS = """() => { const b = [...document.querySelectorAll('button')].filter(e => e.innerText.trim() === 'Send');
  const f = document.getElementById('subscribe');
  return b.length === 1 && !!f && !!(f.compareDocumentPosition(b[0]) & Node.DOCUMENT_POSITION_FOLLOWING); }"""


def status(page) -> str | None:
    return page.locator("#status").inner_text().strip() if page.locator("#status").count() == 1 else None


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)
    same = page.evaluate(WORDS) == TEXT
    controls = page.evaluate(CONTROLS)
    c.score("labels", same and [(f["id"], f["type"]) for f in controls] == [(i, t) for i, t, _ in FIELDS]
            and all(caption in f["labels"] for f, (_, _, caption) in zip(controls, FIELDS, strict=True)))
    button = page.locator("button").filter(has_text=re.compile(r"^\s*Send\s*$"))
    c.score("real_button", same and page.evaluate(AFTER_FIELDS) and button.is_visible())
    c.screenshot(page)
    if button.count() != 1 or page.locator("#name").count() != 1:
        return
    page.locator("#name").fill("Ada")
    button.click()
    c.score("click_works", status(page) == "Thanks, Ada!")
    page.locator("#name").fill("Grace")
    page.locator("#subscribe").focus()
    page.keyboard.press("Tab")
    reached = button.evaluate("b => document.activeElement === b")
    page.keyboard.press("Enter")
    enter = status(page) == "Thanks, Grace!"
    page.locator("#name").fill("Alan")
    button.focus()
    page.keyboard.press(" ")
    c.score("keyboard_works", reached and enter and status(page) == "Thanks, Alan!")


webcheck.run(["labels", "real_button", "click_works", "keyboard_works"], check)
