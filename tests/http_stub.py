"""A canned HTTP endpoint for client tests: every GET and POST gets the same status, headers and body."""

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def canned_server(
    status: int = 200,
    body: bytes = b"{}",
    headers: dict[str, str] | None = None,
    declared: int | None = None,
    delay_s: float = 0.0,
) -> tuple[ThreadingHTTPServer, str, list[str]]:
    """Serve ``status``, ``headers`` and ``body`` after ``delay_s`` to every request, declaring ``declared`` bytes
    (more than it sends cuts the reply short), one request a connection; returns the server, its root URL
    (``http://127.0.0.1:PORT``) and the paths it was asked for."""
    seen: list[str] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):  # noqa: N802
            self.do_POST()

        def do_POST(self):  # noqa: N802
            self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seen.append(self.path)
            time.sleep(delay_s)
            self.send_response(status)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(declared if declared is not None else len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}", seen
