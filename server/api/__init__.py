"""JSON API controllers: thin handlers that validate, call one service function and return."""
