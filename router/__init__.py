"""spotroute's router: chooses where a GPU job runs and deploys it as a Pulumi stack."""

__version__ = "0.1.0"
