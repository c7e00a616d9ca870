print("backup")
