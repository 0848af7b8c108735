"""End to end: a real daemon and webserver, Celery workers on real brokers, the browser journey, the deploy files."""
