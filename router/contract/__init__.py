"""The contract shared by the router and the placement program: clouds and stack-config keys.

Pure and light (standard library only), so `components/` may import it and nothing else of
`router`.
"""
