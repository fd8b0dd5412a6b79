// Package doclimits owns the house rule on the length of the docs: the
// README is a manual of at most 3,000 words and every other Markdown file a
// short note of at most 1,500, not counting the tables `prequalbench report`
// renders into them. Its test walks the repository's Markdown and fails on a
// file over its limit.
package doclimits
