"""Use the page as a person would: type, click, press Enter; score each requirement of the instruction, one
reward component each."""

import webcheck

ITEMS = "[...document.querySelectorAll('#items > li')].map(li => li.firstElementChild?.tagName === 'SPAN' ? " \
        "li.firstElementChild.textContent : null)"


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=1000, height=700)
    items = lambda: page.evaluate(ITEMS)  # noqa: E731
    count = lambda: page.locator("#count").inner_text().strip() if page.locator("#count").count() else None  # noqa: E731
    field, add = page.get_by_label("New item", exact=True), page.get_by_role("button", name="Add", exact=True)
    c.score("labelled_input", field.count() == 1 and field.get_attribute("id") == "new-item")
    start = count() == "Items: 0" and items() == []
    field.fill("  milk  ")
    add.click()
    added = c.score("add", items() == ["milk"])
    c.score("clears_input", added and field.input_value() == "")
    field.fill("   ")
    add.click()
    c.score("blank_ignored", added and items() == ["milk"])
    field.fill("bread")
    field.press("Enter")
    c.score("enter_adds", items() == ["milk", "bread"])
    two = count() == "Items: 2"
    page.locator("#items > li").filter(has_text="milk").get_by_role("button", name="Remove").click()
    c.score("remove", items() == ["bread"])
    c.score("count", start and two and count() == "Items: 1")
    c.screenshot(page)


webcheck.run(["labelled_input", "add", "clears_input", "blank_ignored", "enter_adds", "remove", "count",
              "no_console_errors"], check)
