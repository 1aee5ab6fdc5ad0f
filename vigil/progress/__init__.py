"""Progress through the case's life: what the analyst promised, when it falls due, and how hard the customer presses."""
