print("stele")
