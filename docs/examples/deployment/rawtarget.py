KEYS = ("RAW_URI", "REQUEST_URI", "SCRIPT_NAME", "PATH_INFO", "QUERY_STRING")

def app(environ, start_response):
    body = "".join(f"{key:12} {environ.get(key)!r}\n" for key in KEYS).encode()
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [body]
