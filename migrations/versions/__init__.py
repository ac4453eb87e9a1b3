"""Schema migrations, oldest first. They describe schema only and never import perfci."""
