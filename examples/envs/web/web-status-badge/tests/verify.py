"""One component per requirement of instruction.md, from the page as Chromium renders it."""

import webcheck

GREEN = (0x1E, 0x84, 0x49)


def check(c: webcheck.Checks) -> None:
    page = c.open("index.html", width=800, height=600)
    badge = webcheck.boxes(page, "#badge")
    c.score("text", len(badge) == 1 and badge[0]["text"].strip() == "All systems go")
    if not badge:
        return
    b = badge[0]
    c.score("colours", webcheck.rgb(webcheck.style(page, "#badge", "background-color")) == GREEN
            and webcheck.rgb(webcheck.style(page, "#badge", "color")) == (255, 255, 255))
    c.score("size_and_place", b["h"] >= 40 and abs(b["x"] + b["w"] / 2 - 400) <= 2)
    shot = c.screenshot(page)  # where the look is the point, the pixels: green inside the badge
    c.score("rendered_green", webcheck.near(shot.getpixel((int(b["x"]) + 4, int(b["y"]) + 4)), GREEN))


webcheck.run(["text", "colours", "size_and_place", "rendered_green", "no_console_errors"], check)
