#!/usr/bin/env bash
# test_no_external_refs.sh [BUILD] - no tracked file points a reader at
# something the repository does not contain: a numbered working document
# ("seed 004", "digest 000 section 3", its seed file name), a note or
# contract directory outside the tree ("shared/notes", /work/...), an
# architecture file that is not in the tree, an issue number ("issue 12")
# or "the review".  Sources are cited by author, title, venue and section;
# reasons are given where they are needed.  Matches span line breaks and
# comment leaders (" * ", "# ", "// "), so a reference wrapped over two
# comment lines is found too.  BUILD is not used.
. "$(dirname "$0")/lib.sh" "$@"

# Files not checked:
#  - BENCHMARKS.md and docs/bench-results/: recorded measurement runs,
#    being regenerated separately; remove these two exclusions once they
#    are replaced.
#  - this test itself, which has to spell the patterns.
excluded='^(BENCHMARKS\.md|docs/bench-results/|tests/test_no_external_refs\.sh$)'

if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git -C "$root" ls-files -z > "$tmp/files"
else
  # not a git checkout (an unpacked tarball): every file but build trees
  find . -path ./.git -prune -o -path './build*' -prune -o -type f -print0 \
    | sed -z 's|^\./||' > "$tmp/files"
fi
n=$(tr -cd '\0' < "$tmp/files" | wc -c)
[ "$n" -gt 100 ] && ok || fail "only $n files listed: not the liblock tree?"

# perl: slurp each file, report "path:line: match" for every hit
perl -0 -e '
  my $sep = qr{(?:\s|\*|\#|//)+};          # blanks and comment leaders
  my @pat = (
    qr{\bseeds?$sep(?:\d{3}|0\d\d)\b}i,    # seed 000 .. seed 004
    qr{\b00\d_[0-9a-f]{16}\.txt\b}i,       # a seed file name
    qr{\bdigest$sep(?:\d|\x{a7}|\xc2\xa7|section|shared|`|\()}i,  # digest 004, digest section, digest `...`
    qr{-digest\.md\b}i,                    # 001-malthusian-locks-digest.md
    qr{\bshared/(?:notes|seeds)\b}i,
    qr{\bshared-contracts\b}i,
    qr{(?<![\w.])/work/}i,                 # paths of the machine the work was done on
    qr{\bARCHITECTURE\.md\b}i,
    qr{\bissues?$sep\#?\d+\b}i,            # issue 12, issue #11
    qr{\bthe$sep(?:code$sep)?review\b}i,
  );
  my $bad = 0;
  for my $f (split /\0/, do { local $/; open my $l, "<", $ARGV[0] or die; <$l> }) {
    next if $f =~ /$ARGV[1]/ || -l $f || !-f $f;
    open my $h, "<", $f or next;
    my $t = do { local $/; <$h> };
    next if $t =~ /\0/;                    # binary
    for my $p (@pat) {
      while ($t =~ /$p/g) {
        my $line = 1 + (substr($t, 0, $-[0]) =~ tr/\n//);
        (my $m = $&) =~ s/\s+/ /g;
        print "$f:$line: $m\n";
        $bad++;
      }
    }
  }
  exit($bad ? 1 : 0);
' "$tmp/files" "$excluded" > "$tmp/hits"
hits=$(wc -l < "$tmp/hits")
if [ "$hits" -eq 0 ]; then
  ok
else
  fail "$hits references to documents, issues or paths outside the repository:"
  head -n "${SHOW:-60}" "$tmp/hits" | sed 's/^/  /'
  [ "$hits" -le "${SHOW:-60}" ] || echo "  ... ($((hits - ${SHOW:-60})) more)"
fi
finish
