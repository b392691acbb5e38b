"""The lab's page, wherever a proxy puts it: every address in it is relative to the page.

textual-serve renders its page with absolute addresses built from one `public_url`: the
stylesheet and script (`http://host:8000/static/...`), the websocket (`ws://host:8000/ws`),
and its script opens downloads at `location.origin + "/download/<key>"`. Behind a proxy that
serves the lab under a path (jupyter-server-proxy: `/user/<name>/memlab/`, with the prefix
stripped before the request reaches the lab) all three miss: the browser asks the hub for
`/static/js/textual.js`. So the page is rendered with a placeholder origin, and:

- static addresses become relative (`static/js/textual.js`: under the page's own folder);
- the websocket address is made in the browser, from the page's own address (`ws` beside it,
  `wss:` when the page came over https), before textual.js reads it at `window.onload`;
- downloads (`Ctrl+S`: a screenshot sent to the browser) are opened beside the page too.

The same page then works on `http://localhost:8000/`, through an SSH tunnel on any port,
behind a TLS proxy, and at `/user/ada/memlab/` behind JupyterHub, without the server knowing
which. The lab's own form posts and redirects are relative too (server.py).

Headless: no Textual, no aiohttp.
"""

from __future__ import annotations

# what textual-serve's template is given as its public URL; a reserved name (RFC 2606), so a
# page where a replacement below missed fails to load rather than reaching some host
PAGE_ORIGIN = "http://memlab-page.invalid"

PLACE_URLS = """<script>
(function () {
  // the websocket beside this page: /ws, or /user/ada/memlab/ws behind a hub
  var url = new URL("ws", document.baseURI);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  document.getElementById("terminal").dataset.sessionWebsocketUrl = url.href;
  // textual.js opens downloads at the origin's root; this page's folder is where they are
  var open = window.open, root = location.origin + "/download/";
  window.open = function (href) {
    var rest = Array.prototype.slice.call(arguments, 1);
    if (typeof href === "string" && href.indexOf(root) === 0) {
      href = new URL("download/" + href.slice(root.length), document.baseURI).href;
    }
    return open.apply(window, [href].concat(rest));
  };
})();
</script>"""


class PageError(RuntimeError):
    """textual-serve's page changed shape: the lab cannot place its addresses in it."""


def relative_page(page: str) -> str:
    """textual-serve's page (rendered with PAGE_ORIGIN) with every address relative to it."""
    static = f"{PAGE_ORIGIN}/static/"
    socket = f'data-session-websocket-url="{PAGE_ORIGIN.replace("http:", "ws:", 1)}/ws"'
    if static not in page or socket not in page or "</body>" not in page:
        raise PageError("textual-serve's page has no static or websocket address where the "
                        "lab expects them (a textual-serve release changed its template)")
    page = page.replace(static, "static/").replace(socket, 'data-session-websocket-url=""')
    head, _, tail = page.rpartition("</body>")
    return f"{head}{PLACE_URLS}\n</body>{tail}"


__all__ = ["PAGE_ORIGIN", "PageError", "relative_page"]
