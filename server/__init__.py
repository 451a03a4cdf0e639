"""The running app: the Litestar app factory, settings, the recording proxy, the JSON API,
run orchestration and the `tracecard` command line. Nothing imports `server` but entry points."""

__all__ = ["create_app", "load_settings", "Settings"]


def __getattr__(name: str) -> object:
    # Lazy: importing `tracecard.server.settings` must not pull in Litestar and the whole app.
    if name == "create_app":
        from tracecard.server.app import create_app

        return create_app
    if name in ("load_settings", "Settings"):
        from tracecard.server import settings

        return getattr(settings, name)
    raise AttributeError(name)
