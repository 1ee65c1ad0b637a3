import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "arena.settings")
application = get_wsgi_application()

# A rehearsal's web server will not serve a database that holds live cohorts. Exit code 4 is
# gunicorn's "App failed to load": the master stops instead of respawning workers.
from cohorts.scope import exit_on_live_data  # noqa: E402  (needs the settings loaded above)

exit_on_live_data(code=4)
