"""What a user points irtrace at: backends by their short names, kernel specs, the TileLang
releases irtrace supports. No tilelang here."""
