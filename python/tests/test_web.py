"""The web view in a real browser (root): `rtemu view` serves the page for a lab with a
`rate 20mbit` link and a `delay 10ms` link, and Debian's Chromium, headless, driven through
WebDriver (the `selenium` package with Debian's chromedriver), checks what the page shows and
what its form does to the lab.

Without chromium, chromedriver or selenium the tests skip and say which is missing;
RTEMU_REQUIRE_ROOT=1 (CI) makes that a failure. One lab, one view and one browser serve every
test of the module, and each is taken down even when a test fails.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
from conftest import (
    address,
    in_node,
    lab_up,
    printing,
    require_root,
    rtt_ms,
    skip_or_fail,
    unique_lab,
)
from conftest import wait_for as poll

import rtemu
from rtemu.server import rtemu_binary

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
#: The size the page must be readable at.
VIEWPORT = (1280, 720)

TOPOLOGY = """
lab = "{name}"
neighbours = "static"

[nodes.client]
[nodes.router]
[nodes.server]
[nodes.monitor]
run = ["echo monitor ready"]

[[links]]
name = "access"
endpoints = ["client", "router"]
netem = "rate 20mbit"

[[links]]
name = "wan"
endpoints = ["router", "server"]
netem = "delay 10ms"

[[links]]
name = "mgmt"
endpoints = ["router", "monitor"]

[[lans]]
name = "office"
members = ["client", "monitor"]
"""

T = TypeVar("T")


def wait_for(check: Callable[[], T | None], timeout: float, what: str) -> T:
    """:func:`conftest.wait_for`, where an element the page replaced while ``check`` read it
    (the page re-renders as it polls) counts as not yet."""
    from selenium.common.exceptions import StaleElementReferenceException

    return poll(check, timeout, what, retry=(StaleElementReferenceException,))


@contextmanager
def udp_traffic(lab: rtemu.Lab, tmp: Path, seconds: int) -> Iterator[float]:
    """iperf3 sending 10 Mbit/s of UDP from client to router across `access`; yields the time
    the sender started."""
    server_log = tmp / "iperf3-server.log"
    with in_node(lab, "router", ["iperf3", "-s", "-1", "-p", "5201", "--forceflush"], server_log):
        wait_for(lambda: "listening" in server_log.read_text(), 5, "iperf3 -s did not start")
        argv = ["iperf3", "-c", address(lab, "router", "access"), "-p", "5201"]
        argv += ["-u", "-b", "10M", "-l", "1400", "-t", str(seconds)]
        start = time.monotonic()
        with in_node(lab, "client", argv, tmp / "iperf3-client.log"):
            yield start


def mbits(text: str) -> float | None:
    """A throughput as the page shows it (``9.98 Mbit/s``), in Mbit/s."""
    m = re.fullmatch(r"([\d.]+) (bit|kbit|Mbit|Gbit)/s", text.strip())
    if not m:
        return None
    return float(m.group(1)) * {"bit": 1e-6, "kbit": 1e-3, "Mbit": 1.0, "Gbit": 1e3}[m.group(2)]


@pytest.fixture(scope="module")
def web_lab(client: rtemu.Client) -> Iterator[rtemu.Lab]:
    """The lab the page shows, always brought down after."""
    with lab_up(client, TOPOLOGY.format(name=unique_lab("w"))) as lab:
        yield lab


@pytest.fixture(scope="module")
def view_url(web_lab: rtemu.Lab, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """`rtemu view LAB` on an ephemeral localhost port: the address it printed."""
    log = tmp_path_factory.mktemp("view") / "view.log"
    argv = [rtemu_binary(), "view", web_lab.name, "--listen", "127.0.0.1:0"]
    with printing(argv, log, r"web view at (\S+)", 10) as line:
        yield line.group(1)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """Headless Chromium through chromedriver, with a fresh profile, quit after."""
    require_root()
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("the selenium package (the test extra: ./test.sh installs it)")
    if missing:
        skip_or_fail(f"the browser tests need {', '.join(missing)} (install.sh installs them)")
    options = webdriver.ChromeOptions()
    # Both paths given: Selenium Manager never looks for (or downloads) a browser.
    options.binary_location = CHROMIUM
    profile = tmp_path_factory.mktemp("chromium-profile")
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        f"--window-size={VIEWPORT[0]},{VIEWPORT[1]}",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        # The page itself gets exactly 1280×720 (the window's frame would take some of it).
        w, h = VIEWPORT
        metrics = {"width": w, "height": h, "deviceScaleFactor": 1, "mobile": False}
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def page(browser: Any, view_url: str, web_lab: rtemu.Lab) -> Any:
    """The view of the lab, loaded and live."""
    browser.get(view_url)
    wait_for(
        lambda: "live" in browser.find_element("id", "status").text,
        10,
        "the page never went live",
    )
    return browser


def by_css(page: Any, selector: str) -> list[Any]:
    return list(page.find_elements("css selector", selector))


def severe_console_messages(page: Any) -> list[str]:
    return [e["message"] for e in page.get_log("browser") if e["level"] == "SEVERE"]


def shown_model(page: Any, link: str) -> list[str]:
    """The model texts the page shows for ``link``: its details' two directions, its label."""
    cards = [e.text for e in by_css(page, '#details-body .dir-card [data-field="netem"]')]
    label = by_css(page, f'#graph [data-link-label="{link}"] [data-field="model"]')
    return [*cards, *(e.text for e in label)]


def open_details(page: Any, link: str) -> None:
    """Opens ``link``'s details from the keyboard: focus it in the picture, press Enter."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys

    (edge,) = by_css(page, f'#graph [data-link="{link}"]')
    page.execute_script("arguments[0].focus()", edge)
    ActionChains(page).send_keys(Keys.ENTER).perform()
    title = page.find_element("id", "details-title")
    assert title.text == f"Link {link}"
    assert page.switch_to.active_element == title, "Enter moves the focus to the details"


def submit_model(page: Any, netem: str) -> None:
    from selenium.webdriver.common.keys import Keys

    field = page.find_element("id", "netem-input")
    field.clear()
    field.send_keys(netem, Keys.ENTER)


def node_positions(page: Any) -> dict[str, tuple[str | None, str | None]]:
    """Where the picture puts each node."""
    return {
        e.get_attribute("data-node"): (
            e.find_element("css selector", "rect").get_attribute("x"),
            e.find_element("css selector", "rect").get_attribute("y"),
        )
        for e in by_css(page, "#graph [data-node]")
    }


def router_to_server_rtt(lab: rtemu.Lab) -> float:
    ping = ["ping", "-c", "5", "-i", "0.2", address(lab, "server", "wan")]
    return rtt_ms(lab.node("router").exec(ping, timeout=20, check=True))


def test_every_node_and_link_is_listed(page: Any, web_lab: rtemu.Lab) -> None:
    # The token left the address bar (it is in the tab's session storage only).
    assert "token" not in page.current_url and page.current_url.endswith(f"#lab={web_lab.name}")
    shown = {
        kind: sorted(e.get_attribute(f"data-{kind}") for e in by_css(page, f"#graph [data-{kind}]"))
        for kind in ("node", "link", "lan")
    }
    assert shown == {
        "node": sorted(n.name for n in web_lab.nodes),
        "link": sorted(x.name for x in web_lab.links),
        "lan": sorted(x.name for x in web_lab.lans),
    }
    # Each is reachable from the keyboard and named for screen readers.
    for e in by_css(page, "#graph [data-node], #graph [data-link], #graph [data-lan]"):
        assert e.get_attribute("tabindex") == "0" and e.get_attribute("role") == "button"
        assert e.get_attribute("aria-label")
    # Nodes show their addresses; the table has both directions of every link.
    router = page.find_element("css selector", '#graph [data-node="router"]').text
    assert address(web_lab, "router", "wan") in router
    rows = {
        (r.get_attribute("data-link"), r.get_attribute("data-dir"))
        for r in by_css(page, "#links-table tr[data-link]")
    }
    assert rows == {(x.name, d) for x in web_lab.links for d in ("a-b", "b-a")}
    assert page.execute_script("return [innerWidth, innerHeight]") == list(VIEWPORT)
    assert severe_console_messages(page) == []
    # A reload draws the same picture, and keeps the token (the tab's session storage has it).
    before = node_positions(page)
    page.refresh()
    wait_for(
        lambda: "live" in page.find_element("id", "status").text, 10, "not live after a reload"
    )
    assert node_positions(page) == before


def test_udp_throughput_across_the_rate_link_shows_within_3_s(
    page: Any, web_lab: rtemu.Lab, tmp_path: Path
) -> None:
    (cell,) = by_css(page, '#links-table tr[data-link="access"][data-dir="a-b"] [data-field="bps"]')
    seen: list[str] = []

    def in_range() -> bool:
        seen.append(cell.text)
        value = mbits(seen[-1])
        return value is not None and 9.5 <= value <= 10.5

    with udp_traffic(web_lab, tmp_path, seconds=5) as start:
        wait_for(in_range, 3.0 - (time.monotonic() - start), f"client → router showed {seen[-8:]}")
        took = time.monotonic() - start
    assert took <= 3.0, f"{took:.2f} s"


def test_changing_the_delay_link_in_the_form(page: Any, web_lab: rtemu.Lab) -> None:
    before = router_to_server_rtt(web_lab)
    assert 20 <= before <= 22, f"RTT {before} ms across delay 10ms"
    open_details(page, "wan")
    assert shown_model(page, "wan") == ["delay 10ms"] * 3
    submit_model(page, "delay 30ms")
    status = page.find_element("css selector", '[data-field="set-status"]')
    wait_for(lambda: status.text.startswith("applied"), 5, f"no acknowledgement: {status.text!r}")
    after = router_to_server_rtt(web_lab)
    assert 60 <= after <= 62, f"RTT {after} ms across delay 30ms"
    # The page shows the model the engine runs now, in both directions and on the picture.
    wait_for(
        lambda: shown_model(page, "wan") == ["delay 30ms"] * 3,
        3,
        f"the page shows {shown_model(page, 'wan')}",
    )


def test_an_invalid_model_shows_the_error_and_changes_nothing(
    page: Any, web_lab: rtemu.Lab
) -> None:
    submit_model(page, "delay 30ms bogus")
    error = page.find_element("id", "netem-error")
    wait_for(error.is_displayed, 5, "no error shown")
    assert "bogus (column 12)" in error.text, error.text
    caret = error.find_element("css selector", ".caret").text
    assert caret.splitlines() == ["delay 30ms bogus", " " * 11 + "^ column 12"]
    field = page.find_element("id", "netem-input")
    assert field.get_attribute("aria-invalid") == "true"
    # The browser logs the refused request, and nothing else went wrong.
    (refused,) = severe_console_messages(page)
    assert "/links/wan/set" in refused and "400" in refused
    # The word at the column is selected, for the user to fix.
    selected = page.execute_script(
        "const f = arguments[0]; return f.value.slice(f.selectionStart, f.selectionEnd)", field
    )
    assert selected == "bogus"
    rtt = router_to_server_rtt(web_lab)
    assert 60 <= rtt <= 62, f"RTT {rtt} ms after a refused change"
    # Stats events came meanwhile (the ping took a second): the model is still the last one.
    assert shown_model(page, "wan") == ["delay 30ms"] * 3
    wan = web_lab.stats().links["wan"]
    assert (wan.a_to_b.netem, wan.b_to_a.netem) == ("delay 30ms", "delay 30ms")


def test_cut_restore_and_capture_from_the_details(
    page: Any, web_lab: rtemu.Lab, tmp_path: Path
) -> None:
    open_details(page, "wan")
    (edge,) = by_css(page, '#graph [data-link="wan"]')
    page.find_element("css selector", '[data-action="down"]').click()
    # The engine says the link is cut, and the picture draws it so (class and label).
    wait_for(lambda: "cut" in edge.get_attribute("class").split(), 5, "the link is not drawn cut")
    assert web_lab.stats().links["wan"].a_to_b.cut
    label = page.find_element("css selector", '#graph [data-link-label="wan"]').text
    assert "✕ cut" in label
    page.find_element("css selector", '[data-action="up"]').click()
    wait_for(lambda: "cut" not in edge.get_attribute("class").split(), 5, "still drawn cut")
    assert not web_lab.stats().links["wan"].a_to_b.cut
    # A two-second capture of both ends, handed to the browser as a file to download.
    from selenium.webdriver.support.ui import Select

    Select(page.find_element("id", "capture-seconds")).select_by_value("2")
    page.find_element("css selector", '[data-action="capture"]').click()
    link = wait_for(
        lambda: by_css(page, "a[data-download]"), 10, "no download link after the capture"
    )[0]
    name = f"{web_lab.name}-wan.pcapng"
    assert link.get_attribute("download") == name
    # Downloaded as a user would: the browser writes the file.
    where = {"behavior": "allow", "downloadPath": str(tmp_path)}
    page.execute_cdp_cmd("Browser.setDownloadBehavior", where)
    link.click()
    file = tmp_path / name
    wait_for(lambda: file.exists() and file.stat().st_size > 0, 5, "nothing downloaded")
    assert file.read_bytes()[:4] == b"\x0a\x0d\x0d\x0a", "not a pcapng file"


def test_a_node_s_details_show_its_output_on_request(page: Any, web_lab: rtemu.Lab) -> None:
    page.find_element("css selector", '#graph [data-node="monitor"]').click()
    assert page.find_element("id", "details-title").text == "Node monitor"
    # A bare namespace: no container line.
    assert by_css(page, '#details-body [data-field="container"]') == []

    def shown() -> str:
        (logs,) = by_css(page, '#details-body [data-field="logs"]')
        return str(logs.text)

    assert shown() == ""
    page.find_element("css selector", '#details-body [data-action="logs"]').click()
    wait_for(lambda: "monitor ready" in shown() or None, 5, "the node's output is not shown")
    assert shown() == "monitor ready"
    assert severe_console_messages(page) == []


def test_a_screenshot_is_saved(page: Any, web_lab: rtemu.Lab, tmp_path: Path) -> None:
    root = Path(__file__).resolve().parents[2]
    out = Path(os.environ.get("RTEMU_ARTIFACTS") or root / "target" / "artifacts")
    out.mkdir(parents=True, exist_ok=True)
    shot = out / "web-view.png"
    ping = ["ping", "-c", "100", "-i", "0.05", address(web_lab, "server", "wan")]
    with (
        udp_traffic(web_lab, tmp_path, seconds=4),
        in_node(web_lab, "router", ping, tmp_path / "ping.log"),
    ):
        open_details(page, "access")
        time.sleep(3)
        assert page.save_screenshot(str(shot))
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == VIEWPORT
    assert severe_console_messages(page) == []


def test_the_page_lists_labs_and_follows_one_down_and_back_up(
    page: Any, web_lab: rtemu.Lab, client: rtemu.Client
) -> None:
    status = page.find_element("id", "status")
    other = unique_lab("x")
    with client.up(f'lab = "{other}"\n[nodes.a]\n'):
        wait_for(
            lambda: (
                sorted(e.text for e in by_css(page, "#labs [data-lab]"))
                == sorted([web_lab.name, other])
            ),
            5,
            "the page does not list both labs",
        )
    pid = web_lab.stats().pid
    web_lab.down()
    wait_for(lambda: "down" in status.text, 5, f"the page says {status.text!r}")
    back = client.up(TOPOLOGY.format(name=web_lab.name))
    assert back.name == web_lab.name
    wait_for(lambda: "live" in status.text, 8, f"the page says {status.text!r}")
    engine = page.find_element("id", "engine").text
    assert f"engine pid {back.stats().pid}" in engine and str(pid) not in engine
    # The lab came back with its file's models (the form's change went with the old engine).
    wait_for(
        lambda: shown_model(page, "wan")[-1] == "delay 10ms",
        3,
        f"the page shows {shown_model(page, 'wan')}",
    )
    # One lab again: no list to choose from.
    assert not page.find_element("id", "labs").is_displayed()
    # Replaced in place by one of a node more: its new revision has the page read it whole
    # and draw it again, without going down.
    extra = TOPOLOGY.format(name=web_lab.name) + "\n[nodes.spare]\n"
    client.up(extra, replace=True)
    wait_for(
        lambda: by_css(page, '#graph [data-node="spare"]') != [],
        8,
        "the page does not draw the lab that replaced it",
    )


def test_a_lab_of_more_links_than_a_page_is_shown_a_page_at_a_time(
    page: Any, web_lab: rtemu.Lab, client: rtemu.Client
) -> None:
    name = unique_lab("p")
    links = 130
    text = f'lab = "{name}"\nrouting = "none"\nip = "ipv4"\n[pool]\nipv4_prefix = 30\n'
    text += "".join(f"[nodes.n{i}]\n" for i in range(links + 1))
    text += "".join(f'[[links]]\nendpoints = ["n{i}", "n{i + 1}"]\n' for i in range(links))
    pager = page.find_element("id", "links-page")

    def rows() -> list[str]:
        return [r.get_attribute("data-link") for r in by_css(page, "#links-table tr[data-link]")]

    with client.up(text):
        wait_for(lambda: by_css(page, f'#labs [data-lab="{name}"]'), 5, "the lab is not listed")
        by_css(page, f'#labs [data-lab="{name}"]')[0].click()
        wait_for(lambda: pager.text == "links 1–100 of 130", 5, f"the pager says {pager.text!r}")
        assert page.find_element("id", "links-pager").is_displayed()
        assert rows() == [f"n{i}-n{i + 1}" for i in range(100) for _ in "ab"]
        assert not page.find_element("id", "links-prev").is_enabled()
        page.find_element("id", "links-next").click()
        assert pager.text == "links 101–130 of 130"
        assert rows() == [f"n{i}-n{i + 1}" for i in range(100, 130) for _ in "ab"]
        assert not page.find_element("id", "links-next").is_enabled()
        page.find_element("id", "links-filter").send_keys("n125-")
        assert pager.text == 'links 1–1 of 1 matching "n125-"'
        assert rows() == ["n125-n126"] * 2
        # The page's rows get their figures (an ideal link's kernel counters: no drops).
        cell = '#links-table tr[data-link="n125-n126"][data-dir="a-b"] [data-field="dropsum"]'
        wait_for(lambda: by_css(page, cell)[0].text == "0", 5, "the row has no figures")
    # Back to the lab the other tests show.
    wait_for(lambda: by_css(page, f'#labs [data-lab="{web_lab.name}"]'), 5, "no lab button")
    by_css(page, f'#labs [data-lab="{web_lab.name}"]')[0].click()
    status = page.find_element("id", "status")
    wait_for(
        lambda: f"lab {web_lab.name}: live" in status.text, 10, f"the page says {status.text!r}"
    )
    labs = page.find_element("id", "labs")
    wait_for(lambda: not labs.is_displayed(), 5, "the page still lists two labs")
    assert not page.find_element("id", "links-pager").is_displayed()
