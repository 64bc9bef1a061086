import SteleHub
// Scaffold: serve, invite and bench land here (issue 16).
print("stele-hub: not built yet")
