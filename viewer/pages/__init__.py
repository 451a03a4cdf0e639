"""Page controllers: thin handlers that call one view builder and render one template."""
