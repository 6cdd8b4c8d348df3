"""nbgrader's settings for every user of the hub: copy to /etc/jupyter/nbgrader_config.py.

The exchange is a folder every user can write (``mkdir -m 777 /srv/nbgrader/exchange``): nbgrader makes
each course's inbound folder writable and unreadable to learners, so no learner sees another's submission
or can collect. JupyterHubAuthPlugin asks the hub for the user's groups: only members of
nbgrader-<course> fetch and submit. See jupyterhub_config.py beside this file.
"""
import os

from nbgrader.auth import JupyterHubAuthPlugin

c = get_config()  # noqa: F821 - defined by nbgrader when it reads this file

c.Exchange.root = os.environ.get("TFS_EXCHANGE", "/srv/nbgrader/exchange")
c.CourseDirectory.course_id = os.environ.get("TFS_COURSE", "tfs")
c.Authenticator.plugin_class = JupyterHubAuthPlugin
