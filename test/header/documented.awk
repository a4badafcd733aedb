# Every public function has its comment: the line just above each
# ELASTIC_EXTERN declaration ends a comment, or is the callback typedef the
# function takes, itself right under a comment. Run by `make header-check`.
/ELASTIC_EXTERN/ && !/#define/ {
    ok = prev ~ /\*\/[ \t]*$/ || (prev ~ /^typedef / && prev2 ~ /\*\/[ \t]*$/)
    if (!ok) {
        name = $0
        sub(/\(.*/, "", name)
        sub(/.*[ *]/, "", name)
        printf "%s:%d: %s has no comment above it\n", FILENAME, FNR, name
        bad = 1
    }
}
{
    # a declaration continued over several lines counts as its first line
    continued = prev ~ /,[ \t]*$/ && prev !~ /^[ \t]*(\/\*|\*)/ && $0 ~ /^[ \t]/
    if (!continued) { prev2 = prev; prev = $0 }
}
END { exit bad }
