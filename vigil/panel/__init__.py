"""The analyst panel: pages, live updates, sign-in and the lead overview, served on the daemon's HTTP port."""
