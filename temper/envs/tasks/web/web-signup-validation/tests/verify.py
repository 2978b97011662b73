"""Fill in the sign-up form and submit it, four times in a row on one page (three invalid, then valid), and
score each requirement of the instruction, one reward component each."""

import webcheck

FIELDS = [("email", "Email", "email"), ("password", "Password", "password"), ("confirm", "Confirm password", "password")]
MESSAGES = {"email": "Enter a valid email address.", "password": "Password must be at least 8 characters and contain a digit.",
            "confirm": "Passwords do not match."}


def shown(page, selector: str) -> str | None:
    """The text of the one element `selector` names, if it is shown with some text; else None."""
    el = page.locator(selector)
    if el.count() != 1 or not el.is_visible():
        return None
    return el.inner_text().strip() or None


def state(page) -> dict:
    return {**{k: shown(page, f"#{k}-error") for k in MESSAGES}, "success": shown(page, "#success")}


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)
    c.score("labels", all(page.get_by_label(label, exact=True).count() == 1
                          and page.get_by_label(label, exact=True).get_attribute("id") == key
                          and page.get_by_label(label, exact=True).get_attribute("type") == kind
                          for key, label, kind in FIELDS))
    button = page.locator("#signup").get_by_role("button", name="Sign up", exact=True)
    present = button.count() == 1 and all(page.locator(f"#signup #{key}").count() == 1 for key, _, _ in FIELDS)
    c.score("quiet_start", present and state(page) == dict.fromkeys([*MESSAGES, "success"]))
    if not present:
        return

    def submit(email: str, password: str, confirm: str) -> dict:
        for key, value in (("email", email), ("password", password), ("confirm", confirm)):
            page.locator(f"#signup #{key}").fill(value)
        button.click()
        return state(page)

    a = submit("ada@example", "short1", "short2")  # every field invalid
    b = submit("ada@example.com", "longenough", "longenough")  # the password alone
    d = submit("ada@example.com", "longenough1", "longenough2")  # the confirmation alone
    c.screenshot(page)
    e = submit("ada@example.com", "longenough1", "longenough1")
    c.score("email_error", a["email"] == MESSAGES["email"] and b["email"] is d["email"] is e["email"] is None)
    c.score("password_error", a["password"] == b["password"] == MESSAGES["password"]
            and d["password"] is e["password"] is None)
    c.score("confirm_error", a["confirm"] == d["confirm"] == MESSAGES["confirm"]
            and b["confirm"] is e["confirm"] is None)
    c.score("rejects_invalid", all(s["success"] is None and any(s[k] for k in MESSAGES) for s in (a, b, d)))
    c.score("success", e == {**dict.fromkeys(MESSAGES), "success": "Account created for ada@example.com"})


webcheck.run(["labels", "quiet_start", "email_error", "password_error", "confirm_error", "rejects_invalid", "success",
              "no_console_errors"], check)
