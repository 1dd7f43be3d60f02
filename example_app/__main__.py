"""``python -m example_app``: run the demo on http://127.0.0.1:5000 with nothing configured.

Werkzeug's development server is fine for trying the hub integration; put
a production WSGI server in front for anything else.
"""

from __future__ import annotations

import argparse
import logging
import os

from . import create_app


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m example_app", description=__doc__)
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: %(default)s)")
    parser.add_argument("--port", type=int, default=5000, help="port to listen on (default: %(default)s)")
    options = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    base_url = os.environ.get("PUBLIC_BASE_URL") or f"http://{options.host}:{options.port}"
    app = create_app({"PUBLIC_BASE_URL": base_url})
    app.run(host=options.host, port=options.port)


if __name__ == "__main__":
    main()
