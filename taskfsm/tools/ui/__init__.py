"""``taskfsm ui``: the Task and Workflow lifecycles with the cluster's objects on them, as a local
read-only web page (docs/ui.md).

``server`` (the aiohttp application and the command), ``live`` (the watches and the counts they
keep), ``charts`` (the SVGs from diagrams/ and how the page finds states and edges in them),
``static/`` (the page: HTML, JavaScript and CSS served from the package, no build step).
"""
