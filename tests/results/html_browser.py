"""A real browser for the HTML report's tests: Debian's headless Chromium driven over the DevTools
protocol on a pipe (`--remote-debugging-pipe`: fd 3 carries commands in, fd 4 events out, each
message JSON ended by a NUL byte), so no port is opened and nothing else is needed.

`load(page)` opens a file:// URL with the network emulated offline and every non-file request
blocked by the browser itself, and returns what the page did: each request the browser was asked
to make (the file's own load included, so an empty list would mean the check saw nothing), console
messages, script exceptions, the DevTools log, and the text and section ids the page shows.
`screenshot(page, out)` writes a PNG of the page.
"""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
INSTALL = "apt-get update && apt-get install -y --no-install-recommends chromium"


def chromium() -> str | None:
    return next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)


@dataclass
class PageLoad:
    requests: list[str] = field(default_factory=list)          # every URL the page asked for
    failed: list[str] = field(default_factory=list)            # URL: error text, for the ones that failed
    console: list[tuple[str, str]] = field(default_factory=list)   # (level, text)
    exceptions: list[str] = field(default_factory=list)
    log: list[tuple[str, str]] = field(default_factory=list)       # (level, text) of the DevTools log
    text: str = ""                                             # document.body.innerText
    sections: list[str] = field(default_factory=list)          # ids of <section> elements, in order
    title: str = ""

    def outside_requests(self, page_url: str) -> list[str]:
        """Requests other than the page itself and inline data: URLs (which never leave the file)."""
        return [u for u in self.requests if u != page_url and not u.startswith("data:")]

    def errors(self) -> list[str]:
        return ([f"console {lvl}: {t}" for lvl, t in self.console if lvl in ("error", "assert")]
                + [f"exception: {e}" for e in self.exceptions]
                + [f"log {lvl}: {t}" for lvl, t in self.log if lvl == "error"])


class Browser:
    """One headless Chromium, one tab, commands answered in order (a small CDP client)."""

    def __init__(self, width: int = 1100, height: int = 900, mobile: bool = False):
        exe = chromium()
        if exe is None:
            raise RuntimeError(f"no Chromium found ({', '.join(CHROMIUM_NAMES)}); install it: {INSTALL}")
        self.profile = tempfile.mkdtemp(prefix="glmf-chromium-")
        to_chrome_r, self._to_chrome = os.pipe()
        self._from_chrome, from_chrome_w = os.pipe()

        def fds() -> None:   # in the child: the protocol's fixed descriptors (copies first: either may be 3 or 4)
            r, w = os.dup(to_chrome_r), os.dup(from_chrome_w)
            os.dup2(r, 3)
            os.dup2(w, 4)

        argv = [exe, "--headless=new", "--remote-debugging-pipe", "--no-sandbox", "--disable-gpu",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--mute-audio", f"--user-data-dir={self.profile}",
                # the network is off for the browser as a whole: no proxy answers, no name resolves
                "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
                f"--window-size={width},{height}", "about:blank"]
        self.proc = subprocess.Popen(argv, preexec_fn=fds, pass_fds=(3, 4),
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_chrome_r)
        os.close(from_chrome_w)
        self._buf = b""
        self._id = 0
        self.events: list[dict[str, Any]] = []
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        self.session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        self.width, self.height, self.mobile = width, height, mobile

    # ------------------------------------------------------------------ protocol

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            if time.monotonic() > deadline:
                raise TimeoutError("Chromium did not answer in time")
            chunk = os.read(self._from_chrome, 1 << 16)
            if not chunk:
                raise RuntimeError(f"Chromium closed its pipe (exit {self.proc.poll()})")
            self._buf += chunk
        msg, self._buf = self._buf.split(b"\0", 1)
        return json.loads(msg)

    def call(self, method: str, session: str | None = None, timeout_s: float = 60.0, **params: Any) -> dict[str, Any]:
        self._id += 1
        msg: dict[str, Any] = {"id": self._id, "method": method, "params": params}
        if session:
            msg["sessionId"] = session
        os.write(self._to_chrome, json.dumps(msg).encode() + b"\0")
        deadline = time.monotonic() + timeout_s
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def page(self, method: str, **params: Any) -> dict[str, Any]:
        return self.call(method, session=self.session, **params)

    def wait_for(self, method: str, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        while not any(e.get("method") == method for e in self.events):
            self.events.append(self._read(deadline))

    # ------------------------------------------------------------------ what the tests use

    def load(self, path: Path) -> PageLoad:
        url = Path(path).resolve().as_uri()
        for domain in ("Page", "Network", "Runtime", "Log"):
            self.page(f"{domain}.enable")
        self.page("Network.emulateNetworkConditions", offline=True, latency=0, downloadThroughput=-1,
                  uploadThroughput=-1)
        self.page("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height,
                  deviceScaleFactor=1, mobile=self.mobile)
        self.events.clear()
        self.page("Page.navigate", url=url)
        self.wait_for("Page.loadEventFired")
        time.sleep(0.3)   # late console messages and requests a script might make after load
        self.page("Runtime.evaluate", expression="0")   # drains the events that arrived meanwhile
        out = PageLoad()
        for e in self.events:
            m, p = e.get("method"), e.get("params", {})
            if m == "Network.requestWillBeSent":
                out.requests.append(p["request"]["url"])
            elif m == "Network.loadingFailed":
                out.failed.append(f"{p.get('requestId')}: {p.get('errorText')}")
            elif m == "Runtime.consoleAPICalled":
                out.console.append((p["type"], " ".join(str(a.get("value", a.get("description", "")))
                                                         for a in p.get("args", []))))
            elif m == "Runtime.exceptionThrown":
                d = p["exceptionDetails"]
                out.exceptions.append(d.get("exception", {}).get("description") or d.get("text", ""))
            elif m == "Log.entryAdded":
                out.log.append((p["entry"]["level"], p["entry"]["text"]))
        out.text = self.eval("document.body.innerText")
        out.sections = self.eval("Array.from(document.querySelectorAll('section[id]')).map(s => s.id)")
        out.title = self.eval("document.title")
        return out

    def eval(self, expression: str) -> Any:
        res = self.page("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in res:
            raise RuntimeError(f"{expression}: {res['exceptionDetails']}")
        return res["result"].get("value")

    def sideways(self) -> list[str]:
        """The tables that scroll sideways (wider than their box): their section and first header."""
        return self.eval("Array.from(document.querySelectorAll('.scroll')).filter(d => d.scrollWidth > "
                         "d.clientWidth + 1).map(d => (d.closest('section') || {}).id + ': ' + "
                         "(d.querySelector('th, td') || {}).innerText + ' (' + d.scrollWidth + ' px in ' + "
                         "d.clientWidth + ')')")

    def table_cells(self, section: str) -> dict[str, dict[str, str]]:
        """The tables of a section read back as {first cell: {header: cell}}, a table split in two
        (each led by the key column) read as one; a cell's text without its note (<small>) and a
        key without its marks (<span>); a header without its unit."""
        return self.eval(f"""(() => {{
            const own = el => Array.from(el.childNodes).filter(n => !['SMALL', 'SPAN'].includes(n.nodeName))
                .map(n => n.textContent).join('').trim();
            const out = {{}};
            for (const t of document.querySelectorAll('#{section} table')) {{
                const heads = Array.from(t.querySelectorAll('thead th')).map(own);
                for (const r of t.querySelectorAll('tbody tr')) {{
                    const cells = Array.from(r.cells).map(own);
                    const row = out[cells[0]] = out[cells[0]] || {{}};
                    heads.forEach((h, i) => {{ row[h] = cells[i]; }});
                }}
            }}
            return out;
        }})()""")

    def emulate_print(self, width: int) -> None:
        """The print stylesheet on a page `width` CSS pixels wide (A4 portrait, Chromium's default
        margins: 718), as `print_pdf` lays it out; `load` again for the screen."""
        self.page("Emulation.setDeviceMetricsOverride", width=width, height=self.height, deviceScaleFactor=1,
                  mobile=False)
        self.page("Emulation.setEmulatedMedia", media="print")

    def emulate_screen(self) -> None:
        self.page("Emulation.setEmulatedMedia", media="")
        self.page("Emulation.setDeviceMetricsOverride", width=self.width, height=self.height, deviceScaleFactor=1,
                  mobile=self.mobile)

    def screenshot(self, out: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            h = self.eval("document.documentElement.scrollHeight")
            params["clip"] = {"x": 0, "y": 0, "width": self.width, "height": h, "scale": 1}
            params["captureBeyondViewport"] = True
        Path(out).write_bytes(base64.b64decode(self.page("Page.captureScreenshot", **params)["data"]))
        return Path(out)

    def print_pdf(self) -> bytes:
        return base64.b64decode(self.page("Page.printToPDF")["data"])

    def close(self) -> None:
        try:
            self.call("Browser.close", timeout_s=10)
        except (RuntimeError, TimeoutError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._to_chrome, self._from_chrome):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
